// What one step of the engine reports: phase times, bytes on the wire,
// memory per category, loss, grad norm and what happened (applied, skipped
// for non-finite gradients, failed before or after the commit point). The
// worker's session turns these into telemetry messages for the coordinator.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "client/worker/engine/engine_buffers.h"

namespace zshard::engine {

enum class StepOutcome {
  kApplied = 0,             // Adam ran; params all-gathered
  kSkipped = 1,             // non-finite gradients somewhere: no update
  kFailedBeforeCommit = 2,  // state is still at the previous step
  kFailedAfterCommit = 3,   // Adam ran (state advanced); all-gather failed
};

// "applied", "skipped", "failed_before_commit", "failed_after_commit".
const char* StepOutcomeName(StepOutcome outcome);

// Seconds spent per phase on this rank.
struct PhaseTimes {
  double gradients = 0;        // the workload (not part of the step proper)
  double reduce_scatter = 0;   // intra-instance reduce-scatter, all buckets
  double inter_allreduce = 0;  // owned slices across instances (I > 1)
  double commit = 0;           // local norm/count + the world all-reduce
  double adam = 0;             // Adam on every owned window
  double all_gather = 0;       // inside the all-gathers (overlaps Adam)
  double waiting = 0;          // blocked on an all-gather after Adam
  double step = 0;             // wall time from reduce-scatter to the end
};

struct StepTelemetry {
  int64_t step = 0;       // 1-based training step this result is for
  int64_t adam_step = 0;  // updates applied so far (skipped steps excluded)
  StepOutcome outcome = StepOutcome::kApplied;
  PhaseTimes times;
  // What the collectives move per rank: reduce-scatter (D-1)/D x bucket
  // bytes, all-gather the same, inter-instance all-reduce 2(I-1)/I x owned
  // slice bytes. Sent equals received for these algorithms. The commit
  // all-reduce (12 bytes) is not counted.
  int64_t bytes_sent = 0;
  int64_t bytes_received = 0;
  int64_t elements_sent = 0;  // the same in elements
  int64_t elements_received = 0;
  MemoryBytes memory;
  bool has_loss = false;
  double loss = 0;            // global mean loss over the batch (has_loss)
  double grad_norm = 0;       // global L2 norm of the batch-mean gradient
  double lr = 0;              // learning rate of the step (0 when skipped)
  int64_t nonfinite = 0;      // non-finite gradient elements, whole world
  int64_t skipped_steps = 0;  // cumulative
};

// The result of StepEngine::Step: a status and the telemetry, which is
// filled as far as the step went even when the status is an error.
struct StepResult {
  absl::Status status;
  StepTelemetry telemetry;
  // Some rank passed stop_requested to this step: its commit all-reduce
  // carried the flag to every rank, so every rank that passed the commit
  // point stops after this same step. False when the commit point failed.
  bool stop = false;
  // The step failed inside the commit all-reduce (after this rank's
  // reduced gradients were complete): the optimizer state is still at the
  // previous step, and FinishPendingStep can complete the step with the
  // commit values of a rank that passed.
  bool commit_pending = false;
  // The commit all-reduce's reduced values when this rank passed the
  // commit point (empty otherwise). Opaque: what FinishPendingStep takes
  // on a rank whose same step is commit_pending.
  std::vector<double> commit_values;
};

}  // namespace zshard::engine
