// Membership: checkpoint reports and the commit of their manifests.
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "server/membership/membership.h"

namespace zshard::server {

absl::StatusOr<bool> Membership::ReportCheckpoint(
    const std::string& worker_id, const std::string& token,
    const CheckpointReport& report) {
  Change lock(this);
  ZSHARD_ASSIGN_OR_RETURN(Member * m, members_.Session(worker_id, token));
  const EpochPlan& stable = transition_.stable();
  const EpochPlan& committed = transition_.committed();
  const EpochPlan* epoch = nullptr;
  if (report.epoch > 0 && report.epoch == stable.epoch) epoch = &stable;
  if (report.epoch > 0 && report.epoch == committed.epoch) epoch = &committed;
  if (epoch == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint of epoch ", report.epoch,
                     " is stale (stable epoch ", stable.epoch, ")"));
  }
  if (RankIn(*epoch, m->worker_id) != report.file.rank) {
    return absl::FailedPreconditionError(
        absl::StrCat("worker '", m->name, "' does not hold rank ",
                     report.file.rank, " in epoch ", epoch->epoch));
  }
  if (!report.error.empty()) {
    if (report.dir.empty() || report.step < 0) {
      return absl::InvalidArgumentError(
          "a failed checkpoint report needs a dir and a step >= 0");
    }
    // Training goes on; the operator learns now, not at the next rollback.
    checkpoints_.AddFailure(report, *epoch);
    EventLocked(
        "checkpoint_failed",
        absl::StrCat("step ", report.step, " rank ", report.file.rank, " (",
                     m->name, "): ", report.error, "; the checkpoint of step ",
                     report.step, " is incomplete"));
    FlushLocked();
    return false;
  }
  ZSHARD_ASSIGN_OR_RETURN(std::optional<CheckpointRecord> done,
                          checkpoints_.Add(report, *epoch));
  if (!done.has_value()) return false;
  CheckpointRecord c = *std::move(done);
  absl::Status written = checkpoints_.WriteManifest(c);
  if (!written.ok()) {
    EventLocked("checkpoint",
                absl::StrCat("step ", c.step,
                             ": manifest not written: ", written.message()));
    FlushLocked();
    return written;
  }
  publisher_.batch().AddCheckpoint(c);
  EventLocked("checkpoint",
              absl::StrCat("step ", c.step, ": ", c.files.size(), " files, ",
                           c.bytes, " bytes in ", c.dir));
  checkpoints_.Commit(std::move(c));
  FlushLocked();
  return true;
}

}  // namespace zshard::server
