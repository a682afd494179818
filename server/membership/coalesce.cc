// Membership: coalesced transitions. Membership changes that arrive close
// together (a join storm, a rack lost, a rolling restart) open a settle
// window; the coordinator proposes once no change came for
// transition_settle_ms, or 10 x transition_settle_ms after the window
// opened, so a storm of N changes costs one proposal instead of N. Before
// the first epoch commits nothing trains yet, so the job's forming joins
// may wait up to 100 windows (30 s at the default 300 ms, torchrun's last
// call): a start whose joins take longer than 10 windows is proposed once,
// not proposed and superseded every 10. A
// proposal in flight whose world a later change alters is superseded (the
// transition is abandoned and one proposal answers every change), never
// queued behind.
#include <string>
#include <utility>

#include "server/membership/membership.h"
#include "server/membership/transition/world_policy.h"

namespace zshard::server {
void Membership::ChangeLocked(std::string reason) {
  settle_.Change(std::move(reason), clock_->NowMs());
}

bool Membership::SettlingLocked() const {
  const int64_t windows = transition_.committed().epoch > 0
                              ? kMaxSettleWindows
                              : kMaxFormingSettleWindows;
  return settle_.Settling(clock_->NowMs(), spec_.transition_settle_ms, windows);
}

int Membership::TargetWorldLocked(int* healthy) {
  int n = 0;
  for (const auto& [id, m] : members_.all()) n += HealthyLocked(m);
  *healthy = n;
  return world_.Choose(n);
}

}  // namespace zshard::server
