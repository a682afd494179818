// The isolation rule.
#include "server/membership/members/isolation_guard.h"

namespace zshard::server {

IsolationGuard::Step IsolationGuard::Check(int lapsed, int silent, int live,
                                           int64_t now_ms) {
  const bool most_silent =
      live >= kMinLive && silent > 0 &&
      static_cast<double>(silent) > fraction_ * static_cast<double>(live);
  if (isolated()) {
    if (most_silent) return Step::kHeld;
    since_ms_ = -1;
    return Step::kEnded;
  }
  if (lapsed == 0 || !most_silent) return Step::kNone;
  since_ms_ = now_ms;
  return Step::kStarted;
}

}  // namespace zshard::server
