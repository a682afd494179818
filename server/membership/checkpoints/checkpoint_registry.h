// The coordinator's checkpoint book-keeping (docs/design.md section 7): rank
// files reported per step, the completeness rule (the files of ranks
// 0..D-1 of the reporting epoch are in and their ranges cover every
// element of every param; in a model-parallel job, so for every slot, in
// its data-parallel ranks and its params) and the committed manifests,
// newest last.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/plan/model_spec.h"
#include "common/plan/parallel.h"
#include "server/state/checkpoint_types.h"

namespace zshard::server {

// One rank's report (see zshard.v1.ReportCheckpointRequest).
struct CheckpointReport {
  int64_t epoch = 0;
  int64_t step = 0;
  int64_t adam_step = 0;
  std::string dir;
  CheckpointFileInfo file;
  // Non-empty: the rank could not write its file (`file` holds only the
  // rank), and this is why.
  std::string error;
};

// The reporting epoch's shape.
struct CheckpointEpoch {
  int64_t epoch = 0;
  int world = 0;
  int instances = 1;
  int expert_parallel = 1;
  // The job's model-parallel sizes: world is R x T x P x C, instances
  // split each slot's data-parallel domain of R x C ranks.
  plan::ParallelSizes parallel;
};

// A checkpoint attempt without a manifest: still collecting files, given
// up (a rank's write failed, a newer checkpoint was committed first) or
// found damaged after its commit.
struct CheckpointAttempt {
  int64_t step = 0;
  std::string dir;
  int files_reported = 0;
  int files_expected = 0;
  // One line per failure: "rank R: reason" or "damaged: reason".
  std::vector<std::string> failures;
};

// Thread-compatible: the membership calls it under its lock.
class CheckpointRegistry {
 public:
  // Records `report` of a rank of instance 0 of `epoch` (report.file.rank
  // is the global rank; a model-parallel job's file is kept with its slot
  // and data-parallel rank). `slots` holds the model of every slot, by
  // slot index (one without model parallelism). Returns the complete
  // manifest (job, committed_ms left for the caller) once this report
  // completes the checkpoint (every slot's files of ranks 0..D-1 are in
  // and cover its model), nullopt while files are missing.
  // InvalidArgument for a malformed report (rank outside 0..D-1 of its
  // slot, a path that is absolute or climbs out of the dir, ranges outside
  // the slot's model) or a `slots` that does not match epoch.parallel,
  // FailedPrecondition for a step not newer than the newest committed one
  // or files that leave an element uncovered.
  absl::StatusOr<std::optional<CheckpointRecord>> Add(
      const CheckpointReport& report, const CheckpointEpoch& epoch,
      absl::Span<const plan::ModelSpec> slots);
  // Add for a job without model parallelism.
  absl::StatusOr<std::optional<CheckpointRecord>> Add(
      const CheckpointReport& report, const CheckpointEpoch& epoch,
      const plan::ModelSpec& model) {
    return Add(report, epoch, absl::MakeConstSpan(&model, 1));
  }

  // Makes `record` the newest committed checkpoint; forgets pending
  // reports of steps up to its step.
  void Commit(CheckpointRecord record);

  // Records that `rank` of `epoch` could not write its file of step `step`
  // into `dir`, with `reason`: the attempt stays incomplete.
  void AddFailure(int64_t step, const std::string& dir, int rank,
                  const std::string& reason, const CheckpointEpoch& epoch);
  // Takes the committed checkpoint in `dir` out of use (its files are
  // damaged or missing): Newest() no longer returns it, and it is listed
  // among the incomplete attempts with `reason`. Returns false when no
  // committed checkpoint is in `dir`.
  bool MarkDamaged(const std::string& dir, const std::string& reason);
  // Attempts without a usable manifest, oldest first: the given-up and
  // damaged ones (the latest 32), then those still collecting files.
  std::vector<CheckpointAttempt> Incomplete() const;

  // The newest committed checkpoint, or null.
  const CheckpointRecord* Newest() const;
  // Committed checkpoints, oldest first.
  const std::vector<CheckpointRecord>& committed() const { return committed_; }

 private:
  struct Pending {
    CheckpointEpoch epoch;
    int64_t adam_step = 0;
    // By slot x D + data-parallel rank (the rank without model
    // parallelism).
    std::map<int, CheckpointFileInfo> files;
    std::map<int, std::string> failures;  // by global rank
  };
  using Key = std::pair<int64_t, std::string>;  // step, dir
  Pending& PendingFor(const Key& key, const CheckpointEpoch& epoch,
                      int64_t adam_step);
  static CheckpointAttempt AttemptOf(const Key& key, const Pending& p);
  void GiveUp(CheckpointAttempt attempt);

  std::map<Key, Pending> pending_;
  std::vector<CheckpointRecord> committed_;
  std::vector<CheckpointAttempt> given_up_;
};

// OK when the ranges of `files` cover every element of every param of
// `model` (expert params once per expert rank < expert_parallel);
// otherwise FailedPrecondition naming the first uncovered element.
absl::Status CheckCoverage(const std::vector<CheckpointFileInfo>& files,
                           const plan::ModelSpec& model, int expert_parallel);

// CheckCoverage for every slot of `record` (its files of that slot against
// slots[slot]; the whole record without model parallelism), the message
// prefixed with "slot (tp T, pp P): " in a model-parallel checkpoint.
// InvalidArgument when `slots` does not match the record's T x P.
absl::Status CheckSlotsCoverage(const CheckpointRecord& record,
                                absl::Span<const plan::ModelSpec> slots,
                                int expert_parallel);

// The files of `record` that hold slot `slot`'s state.
std::vector<CheckpointFileInfo> SlotFiles(const CheckpointRecord& record,
                                          int slot);

}  // namespace zshard::server
