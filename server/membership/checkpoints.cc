// Membership: checkpoint reports and the commit of their manifests.
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/status.h"
#include "server/membership/membership.h"

namespace zshard::server {

absl::StatusOr<bool> Membership::ReportCheckpoint(
    const std::string& worker_id, const std::string& token,
    const CheckpointReport& report) {
  absl::MutexLock lock(&mu_);
  ZSHARD_ASSIGN_OR_RETURN(Member * m, SessionLocked(worker_id, token));
  const EpochPlan* epoch = nullptr;
  if (report.epoch > 0 && report.epoch == stable_.epoch) epoch = &stable_;
  if (report.epoch > 0 && report.epoch == committed_.epoch) epoch = &committed_;
  if (epoch == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint of epoch ", report.epoch,
                     " is stale (stable epoch ", stable_.epoch, ")"));
  }
  if (RankIn(*epoch, m->worker_id) != report.file.rank) {
    return absl::FailedPreconditionError(
        absl::StrCat("worker '", m->name, "' does not hold rank ",
                     report.file.rank, " in epoch ", epoch->epoch));
  }
  CheckpointEpoch shape{epoch->epoch, epoch->world, epoch->instances,
                        spec_.layout.expert_parallel};
  ZSHARD_ASSIGN_OR_RETURN(std::optional<CheckpointRecord> done,
                          checkpoints_.Add(report, shape, spec_.model));
  if (!done.has_value()) return false;
  CheckpointRecord c = *std::move(done);
  c.job = spec_.name;
  c.committed_ms = WallTimeMs();
  if (options_.write_manifest) {
    absl::Status written = options_.write_manifest(c);
    if (!written.ok()) {
      EventLocked("checkpoint",
                  absl::StrCat("step ", c.step,
                               ": manifest not written: ", written.message()));
      FlushLocked();
      return written;
    }
  }
  ++stats_.checkpoints;
  stats_.last_checkpoint_step = c.step;
  stats_.last_checkpoint_ms = c.committed_ms;
  if (store_ != nullptr) pending_write_.checkpoints.push_back(c);
  EventLocked("checkpoint",
              absl::StrCat("step ", c.step, ": ", c.files.size(), " files, ",
                           c.bytes, " bytes in ", c.dir));
  checkpoints_.Commit(std::move(c));
  FlushLocked();
  return true;
}

}  // namespace zshard::server
