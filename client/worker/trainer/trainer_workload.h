// TrainerWorkload: the gradients of the `trainer` workload come from a
// user's training process attached to this daemon's TrainerHub. Each step
// it hands the trainer the step, its rank, the world and the rate, waits
// for its backward pass (the gradients land straight in the shared grad
// buffer: no copy), and after the step sends it the result. A trainer that
// dies is waited for, up to the job's trainer_timeout_ms, and the one that
// attaches next resumes the same step.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "client/worker/engine/workload.h"
#include "client/worker/trainer/trainer_hub.h"
#include "common/job/job_spec.h"

namespace zshard::trainer {

class TrainerWorkload final : public engine::Workload {
 public:
  struct Options {
    int world = 1;
    int rank = 0;
    int64_t global_batch = 1;
    int64_t steps = 0;  // the job's length
    // Steps up to this one were applied before a rollback (0: none).
    int64_t repeat_through = 0;
    job::OptimizerSpec optimizer;  // for each step's rate
    // The job spec's default unless set (MakeTrainerWorkload sets the
    // job's).
    int64_t trainer_timeout_ms = job::WorkloadSpec().trainer_timeout_ms;
    // Initial params, fp32, flattened in registration order; empty: zeros
    // (an epoch that takes its state from moves or a checkpoint).
    std::vector<float> initial;
    std::vector<int64_t> param_numels;  // registration order
    // A model-parallel job's position and rendezvous (world and rank are
    // then the replicas and the replica).
    std::optional<ModelParallelStep> model_parallel;
  };

  // `hub` must outlive the workload.
  TrainerWorkload(TrainerHub* hub, Options options);

  void InitialParam(int p, absl::Span<float> out) const override;
  // FailedPrecondition when `state`'s buffers are not shared;
  // DeadlineExceeded when no trainer answers within the timeout.
  absl::StatusOr<double> Gradients(int64_t step,
                                   engine::ModelState& state) override;
  // The trainer signals buckets as its backward pass completes them.
  bool streams_gradients() const override { return true; }
  absl::StatusOr<double> StreamGradients(
      int64_t step, engine::ModelState& state,
      engine::GradientStream& stream) override;
  void StepFinished(const engine::StepReport& report) override;
  // The trainer asked in its backward_done (overlap_param_gather).
  bool defers_param_gather() const override { return defer_gather_; }
  // Tells the trainer (TrainerHub::SendGathered).
  void ParamsGathered(int64_t step, int buffer, int bucket, bool ok) override;
  std::optional<std::string> LeaveReason() const override {
    return leave_reason_;
  }
  bool has_loss() const override { return has_loss_; }
  int64_t global_batch() const override { return options_.global_batch; }

 private:
  // One step's exchange; `stream` null: the buckets are not streamed.
  absl::StatusOr<double> RunStep(int64_t step, engine::ModelState& state,
                                 engine::GradientStream* stream);

  TrainerHub* const hub_;
  const Options options_;
  std::vector<int64_t> offsets_;  // of each param in `initial`
  bool has_loss_ = false;
  bool defer_gather_ = false;  // this step's trainer waits per bucket
  // Set when no trainer came back within the timeout.
  std::optional<std::string> leave_reason_;
};

// The workload of rank `rank` of `world` for `job` (kind trainer; a
// model-parallel job's slot job). When `fresh` (the job's first epoch),
// waits for a trainer (at most the job's trainer_timeout_ms) and takes the
// initial params from its model. Steps up to `repeat_through` are told to
// the trainer as repeated. With `model_parallel`, the trainer is told its
// replica and the number of replicas as its rank and world.
absl::StatusOr<std::unique_ptr<engine::Workload>> MakeTrainerWorkload(
    TrainerHub* hub, const job::JobSpec& job, int world, int rank, bool fresh,
    int64_t repeat_through = 0,
    const std::optional<ModelParallelStep>& model_parallel = std::nullopt);

}  // namespace zshard::trainer
