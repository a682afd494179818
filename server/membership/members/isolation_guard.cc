// The isolation rule.
#include "server/membership/members/isolation_guard.h"

namespace zshard::server {

IsolationGuard::Step IsolationGuard::Check(int silent, int live,
                                           int64_t now_ms) {
  const bool most_silent =
      live >= kMinLive && silent > 0 &&
      static_cast<double>(silent) > fraction_ * static_cast<double>(live);
  if (most_silent) {
    if (isolated()) return Step::kHeld;
    since_ms_ = now_ms;
    return Step::kStarted;
  }
  if (!isolated()) return Step::kNone;
  since_ms_ = -1;
  return Step::kEnded;
}

}  // namespace zshard::server
