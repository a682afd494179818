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

#include "absl/strings/str_cat.h"
#include "server/membership/membership.h"
#include "server/membership/world_policy.h"

namespace zshard::server {
void Membership::ChangeLocked(std::string reason) {
  change_reason_ = std::move(reason);
  last_change_ms_ = clock_->NowMs();
  if (settle_since_ms_ < 0) settle_since_ms_ = last_change_ms_;
  ++settle_changes_;
}

bool Membership::SettlingLocked() const {
  const int64_t settle = spec_.transition_settle_ms;
  if (settle <= 0 || settle_since_ms_ < 0) return false;
  const int64_t now = clock_->NowMs();
  const int64_t windows = transition_.committed().epoch > 0
                              ? kMaxSettleWindows
                              : kMaxFormingSettleWindows;
  return now - last_change_ms_ < settle &&
         now - settle_since_ms_ < windows * settle;
}

int Membership::TargetWorldLocked(int* healthy) {
  int n = 0;
  for (const auto& [id, m] : members_.all()) n += HealthyLocked(m);
  *healthy = n;
  int w = ChooseWorld(n, spec_.world, target_world_);
  // Worlds the plan cannot be made for (e.g. expert_parallel not dividing
  // D) are skipped downwards.
  while (w > 0 && plans_.Hash(w).empty()) {
    w -= job::WorldStep(spec_.world);
    if (w < spec_.world.min) w = 0;
  }
  return w;
}

std::string Membership::ProposalReasonLocked() const {
  if (gathered_ <= 1) return change_reason_;
  return absl::StrCat(change_reason_, " (with ", gathered_ - 1,
                      " more changes gathered into this proposal)");
}

}  // namespace zshard::server
