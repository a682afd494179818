// Workload: what produces a rank's gradients every step (the synthetic
// formula of docs/design.md section 5, a small regression model, or a fixed
// gradient for benchmarks), and the params a run starts from.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "client/worker/engine/model_state.h"

namespace zshard::engine {

class GradientStream;  // gradient_stream.h

// What a workload learns of a step it produced the gradients of.
struct StepReport {
  int64_t step = 0;
  bool ok = false;       // the step completed (applied or skipped)
  bool applied = false;  // false: skipped everywhere (non-finite gradient)
  double grad_norm = 0;  // global, before clipping
  bool has_loss = false;
  double loss = 0;  // the world's summed loss / global batch
  // Buckets whose all-gather runs after StepFinished (the workload asked
  // with defers_param_gather): ParamsGathered follows for each. 0: every
  // param was complete before StepFinished.
  int deferred_gathers = 0;
};

// One rank's share of a data-parallel workload. A workload is created for
// a given world size and rank; the sum of every rank's gradients is the
// global gradient sum over the global batch. Not thread-safe,
// except ParamsGathered (see there).
class Workload {
 public:
  virtual ~Workload() = default;

  // The initial value (fp32, before rounding to the param dtype) of every
  // element of param `p`: out has the param's numel elements.
  virtual void InitialParam(int p, absl::Span<float> out) const = 0;

  // Writes this rank's gradient sum for 1-based training step `step` into
  // `state` (every param), reading the current params from it when the
  // workload has a model. Returns this rank's summed loss over its samples
  // (0 when the workload has no loss).
  virtual absl::StatusOr<double> Gradients(int64_t step, ModelState& state) = 0;

  // True when the workload hands its gradients over bucket by bucket
  // (StreamGradients), so that the engine reduces them while the rest are
  // produced. Default false.
  virtual bool streams_gradients() const { return false; }

  // Gradients, marking each bucket in `stream` as it becomes final (the
  // engine marks every bucket once this returns OK). Called instead of
  // Gradients when streams_gradients(). Default: Gradients.
  virtual absl::StatusOr<double> StreamGradients(int64_t step,
                                                 ModelState& state,
                                                 GradientStream& /*stream*/) {
    return Gradients(step, state);
  }

  // Called at the end of every Step whose Gradients succeeded, whether the
  // rest of the step did or not (report.ok). Default: nothing.
  virtual void StepFinished(const StepReport& /*report*/) {}
  // overlap_param_gather: true when this step's params may be all-gathered
  // after StepFinished, bucket by bucket in forward order (the reader of
  // the params waits for each bucket's ParamsGathered). Asked once the
  // step's gradients are in. Default false: every bucket is gathered
  // before StepFinished.
  virtual bool defers_param_gather() const { return false; }
  // Bucket `bucket` of buffer `buffer` holds step `step`'s updated params
  // (ok), or its all-gather failed (false: the params stay stale until
  // the next epoch publishes them, and the next step fails). Called once
  // per deferred bucket, in forward order, on the engine's gathering
  // thread: concurrently with the next step's Gradients. Default: nothing.
  virtual void ParamsGathered(int64_t /*step*/, int /*buffer*/, int /*bucket*/,
                              bool /*ok*/) {}

  // Why this worker should leave the job (hand its state over, as on
  // SIGTERM) after a failed Gradients, e.g. its trainer process gone past
  // its timeout; nullopt (the default) to wait for the next epoch.
  virtual std::optional<std::string> LeaveReason() const {
    return std::nullopt;
  }

  // True when Gradients returns a meaningful loss.
  virtual bool has_loss() const = 0;

  // The global batch B: summed gradients are divided by it.
  virtual int64_t global_batch() const = 0;
};

}  // namespace zshard::engine
