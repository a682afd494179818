// The coordinator's checkpoint book-keeping (DESIGN.md section 7): rank
// files reported per step, the completeness rule (the files of ranks
// 0..D-1 of the reporting epoch are in and their ranges cover every
// element of every param) and the committed manifests, newest last.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/plan/model_spec.h"
#include "server/membership/checkpoint_types.h"

namespace zshard::server {

// One rank's report (see zshard.v1.ReportCheckpointRequest).
struct CheckpointReport {
  int64_t epoch = 0;
  int64_t step = 0;
  int64_t adam_step = 0;
  std::string dir;
  CheckpointFileInfo file;
};

// The reporting epoch's shape.
struct CheckpointEpoch {
  int64_t epoch = 0;
  int world = 0;
  int instances = 1;
  int expert_parallel = 1;
};

// Thread-compatible: the membership calls it under its lock.
class CheckpointRegistry {
 public:
  // Records `report` of a rank of instance 0 of `epoch`. Returns the
  // complete manifest (job, committed_ms left for the caller) once this
  // report completes the checkpoint, nullopt while files are missing.
  // InvalidArgument for a malformed report (rank outside 0..D-1, a path
  // that is absolute or climbs out of the dir, ranges outside the model),
  // FailedPrecondition for a step not newer than the newest committed one.
  absl::StatusOr<std::optional<CheckpointRecord>> Add(
      const CheckpointReport& report, const CheckpointEpoch& epoch,
      const plan::ModelSpec& model);

  // Makes `record` the newest committed checkpoint; forgets pending
  // reports of steps up to its step.
  void Commit(CheckpointRecord record);

  // The newest committed checkpoint, or null.
  const CheckpointRecord* Newest() const;
  // Committed checkpoints, oldest first.
  const std::vector<CheckpointRecord>& committed() const { return committed_; }

 private:
  struct Pending {
    CheckpointEpoch epoch;
    int64_t adam_step = 0;
    std::map<int, CheckpointFileInfo> files;  // by rank
  };
  std::map<std::pair<int64_t, std::string>, Pending> pending_;
  std::vector<CheckpointRecord> committed_;
};

// OK when the ranges of `files` cover every element of every param of
// `model` (expert params once per expert rank < expert_parallel);
// otherwise FailedPrecondition naming the first uncovered element.
absl::Status CheckCoverage(const std::vector<CheckpointFileInfo>& files,
                           const plan::ModelSpec& model, int expert_parallel);

}  // namespace zshard::server
