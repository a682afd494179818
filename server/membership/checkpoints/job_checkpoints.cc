// A job's checkpoints: reports, manifests and their counters.
#include "server/membership/checkpoints/job_checkpoints.h"

#include <utility>

#include "common/clock.h"
#include "common/job/job_slot.h"
#include "common/status.h"

namespace zshard::server {

CheckpointEpoch JobCheckpoints::Shape(const EpochPlan& epoch) const {
  return {epoch.epoch, epoch.world, epoch.instances,
          spec_->layout.expert_parallel, spec_->parallel};
}

absl::StatusOr<std::optional<CheckpointRecord>> JobCheckpoints::Add(
    const CheckpointReport& report, const EpochPlan& epoch) {
  ZSHARD_ASSIGN_OR_RETURN(
      std::optional<CheckpointRecord> done,
      registry_.Add(report, Shape(epoch), job::SlotModels(*spec_)));
  if (!done.has_value()) return done;
  done->job = spec_->name;
  done->committed_ms = WallTimeMs();
  return done;
}

void JobCheckpoints::AddFailure(const CheckpointReport& report,
                                const EpochPlan& epoch) {
  registry_.AddFailure(report.step, report.dir, report.file.rank, report.error,
                       Shape(epoch));
  ++failures_;
}

absl::Status JobCheckpoints::WriteManifest(
    const CheckpointRecord& record) const {
  if (!write_manifest_) return absl::OkStatus();
  return write_manifest_(record);
}

void JobCheckpoints::Commit(CheckpointRecord record) {
  ++count_;
  last_step_ = record.step;
  last_ms_ = record.committed_ms;
  registry_.Commit(std::move(record));
}

}  // namespace zshard::server
