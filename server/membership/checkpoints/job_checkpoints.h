// A job's checkpoints as the coordinator keeps them (docs/design.md section 7):
// the registry of reported files and committed manifests, the manifest
// write, the counters for metrics, and the rollback source: whether the
// next proposal restores every range from the newest checkpoint.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/job/job_spec.h"
#include "server/membership/checkpoints/checkpoint_registry.h"
#include "server/state/checkpoint_types.h"
#include "server/state/types.h"

namespace zshard::server {

// Thread-compatible: the membership calls it under its lock. Borrows
// `spec`, which must outlive it.
class JobCheckpoints {
 public:
  // `write_manifest` (may be empty: no file) writes a completed
  // checkpoint's manifest.json before it is committed.
  JobCheckpoints(
      const job::JobSpec* spec,
      std::function<absl::Status(const CheckpointRecord&)> write_manifest)
      : spec_(spec), write_manifest_(std::move(write_manifest)) {}

  // Records a rank's report against `epoch` (the committed or stable epoch
  // the reporter holds `report.file.rank` in). Returns the completed
  // manifest (job and wall-clock commit time set) once this report
  // completes the checkpoint, nullopt while files are missing; errors as
  // CheckpointRegistry::Add.
  absl::StatusOr<std::optional<CheckpointRecord>> Add(
      const CheckpointReport& report, const EpochPlan& epoch);
  // Records a rank's failed write (report.error set) against `epoch`: the
  // attempt stays incomplete and the failure is counted.
  void AddFailure(const CheckpointReport& report, const EpochPlan& epoch);
  // Takes the committed checkpoint in `dir` out of use (see
  // CheckpointRegistry::MarkDamaged). False when none is in `dir`.
  bool MarkDamaged(const std::string& dir, const std::string& reason) {
    return registry_.MarkDamaged(dir, reason);
  }
  // Attempts without a usable manifest, oldest first.
  std::vector<CheckpointAttempt> Incomplete() const {
    return registry_.Incomplete();
  }
  // Failed rank writes reported since the coordinator started.
  int64_t failures() const { return failures_; }

  // Writes `record`'s manifest.json (OK when no writer is set).
  absl::Status WriteManifest(const CheckpointRecord& record) const;
  // Makes `record` the newest committed checkpoint and counts it.
  void Commit(CheckpointRecord record);

  // The newest committed checkpoint, or null.
  const CheckpointRecord* Newest() const { return registry_.Newest(); }
  // Committed checkpoints, oldest first.
  const std::vector<CheckpointRecord>& committed() const {
    return registry_.committed();
  }

  // The next proposal restores from the newest checkpoint: the first epoch
  // after --restore, or ranks that could not agree on a step.
  bool restore_next() const { return restore_next_; }
  void set_restore_next(bool restore) { restore_next_ = restore; }

  // Committed manifests, the newest one's step (-1: none) and its commit
  // time (wall clock ms; 0: none).
  int64_t count() const { return count_; }
  int64_t last_step() const { return last_step_; }
  int64_t last_ms() const { return last_ms_; }

 private:
  // The reporting epoch's shape, as the registry checks reports against.
  CheckpointEpoch Shape(const EpochPlan& epoch) const;

  const job::JobSpec* const spec_;
  const std::function<absl::Status(const CheckpointRecord&)> write_manifest_;
  CheckpointRegistry registry_;
  bool restore_next_ = false;
  int64_t count_ = 0;
  int64_t last_step_ = -1;
  int64_t last_ms_ = 0;
  int64_t failures_ = 0;
};

}  // namespace zshard::server
