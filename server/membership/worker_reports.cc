// Membership: what workers report of their own -- events such as a trainer
// process lost, and a training step that failed in a stable epoch. Its ranks
// keep their state and wait for a new epoch. When a member died, its lease
// expiring starts that epoch. When every member is alive (a peer paused
// past the collective timeout, a network blip), nothing would: so once each
// member of the epoch has heartbeated after the report, the coordinator
// proposes the same world again, with an event saying why. No step waits
// forever for a transition that never comes.
#include <algorithm>
#include <iterator>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "server/membership/membership.h"

namespace zshard::server {

absl::Status Membership::WorkerEvent(const std::string& worker_id,
                                     const std::string& token,
                                     const std::string& kind,
                                     const std::string& reason) {
  static const char* const kKinds[] = {"trainer_attached", "trainer_lost",
                                       "trainer_refused"};
  if (std::find(std::begin(kKinds), std::end(kKinds), kind) ==
      std::end(kKinds)) {
    return absl::InvalidArgumentError(
        absl::StrCat("event kind '", kind.substr(0, 64),
                     "' is not one a worker reports (trainer_attached, "
                     "trainer_lost, trainer_refused)"));
  }
  Change lock(this);
  ZSHARD_ASSIGN_OR_RETURN(Member * m, members_.Session(worker_id, token));
  EventLocked(kind, absl::StrCat("member ", m->name, ": ",
                                 MemberTable::ClipReason(reason)));
  FlushLocked();
  return absl::OkStatus();
}

void Membership::CoordinatorEvent(const std::string& kind,
                                  const std::string& reason) {
  Change lock(this);
  EventLocked(kind, reason);
  FlushLocked();
}

void Membership::StepFailedLocked(const Member& reporter, int64_t epoch,
                                  const PrepareFailure& failure) {
  if (health_.step_failure.epoch == epoch)
    return;  // one report per epoch is enough
  health_.step_failure.epoch = epoch;
  health_.step_failure.step = failure.step;
  health_.step_failure.at_ms = clock_->NowMs();
  health_.step_failure.reporter = reporter.name;
  health_.step_failure.error = MemberTable::ClipReason(failure.error);
  EventLocked("step_failed",
              absl::StrCat("epoch ", epoch, ": step ", failure.step,
                           " failed on member ", reporter.name, ": ",
                           health_.step_failure.error));
}

void Membership::CheckStepFailureLocked() {
  const EpochPlan& committed = transition_.committed();
  if (health_.step_failure.epoch == 0 ||
      health_.step_failure.epoch != committed.epoch ||
      health_.step_failed_epoch == committed.epoch ||
      !transition_.committed_stable() || transition_.proposal() != nullptr) {
    return;
  }
  const int64_t now = clock_->NowMs();
  const int64_t since = now - health_.step_failure.at_ms;
  for (int r = 0; r < committed.world; ++r) {
    const Member* m = members_.Find(committed.slots[r].worker_id);
    // A member gone or silent since the report: its lease decides.
    if (m == nullptr || !IsLive(m->state) ||
        members_.SilenceMs(*m, now) >= since) {
      return;
    }
  }
  const std::string why = absl::StrCat(
      "step ", health_.step_failure.step, " failed on member ",
      health_.step_failure.reporter, " (", health_.step_failure.error,
      ") and every member is alive: the same world again");
  EventLocked("replan", absl::StrCat("epoch ", committed.epoch, ": ", why));
  settle_.set_reason(why);
  health_.step_failed_epoch = committed.epoch;
  BackOffLocked();
}

}  // namespace zshard::server
