// TrainerWorkload: the step exchange with the attached trainer.
#include "client/worker/trainer/trainer_workload.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "common/job/lr_schedule.h"
#include "common/logging.h"
#include "common/status.h"

namespace zshard::trainer {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

TrainerWorkload::TrainerWorkload(TrainerHub* hub, Options options)
    : hub_(hub), options_(std::move(options)) {
  int64_t offset = 0;
  for (int64_t n : options_.param_numels) {
    offsets_.push_back(offset);
    offset += n;
  }
}

void TrainerWorkload::InitialParam(int p, absl::Span<float> out) const {
  if (options_.initial.empty()) {
    std::fill(out.begin(), out.end(), 0.0f);
    return;
  }
  const float* from = options_.initial.data() + offsets_[p];
  std::copy(from, from + out.size(), out.begin());
}

absl::StatusOr<double> TrainerWorkload::Gradients(int64_t step,
                                                  engine::ModelState& state) {
  return RunStep(step, state, nullptr);
}

absl::StatusOr<double> TrainerWorkload::StreamGradients(
    int64_t step, engine::ModelState& state, engine::GradientStream& stream) {
  return RunStep(step, state, &stream);
}

absl::StatusOr<double> TrainerWorkload::RunStep(
    int64_t step, engine::ModelState& state, engine::GradientStream* stream) {
  const engine::SharedBuffers* shared = state.shared_buffers();
  if (shared == nullptr) {
    return absl::FailedPreconditionError(
        "trainer workload: the engine's buffers are not in shared memory");
  }
  TrainerStep info;
  info.step = step;
  info.rank = options_.rank;
  info.world = options_.world;
  info.global_batch = options_.global_batch;
  info.steps = options_.steps;
  info.repeated = step <= options_.repeat_through;
  info.model_parallel = options_.model_parallel;
  info.lr = job::LearningRate(options_.optimizer.lr_schedule,
                              options_.optimizer.lr, step);
  const int64_t timeout = options_.trainer_timeout_ms;
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout);
  while (true) {
    const int64_t left = std::max<int64_t>(
        1, std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
                                                                 Clock::now())
               .count());
    absl::Status attached = hub_->WaitForTrainer(left);
    if (!attached.ok()) {
      attached =
          absl::Status(attached.code(),
                       absl::StrCat("step ", step, ": ", attached.message()));
      if (attached.code() == absl::StatusCode::kDeadlineExceeded) {
        leave_reason_ = std::string(attached.message());
      }
      return attached;
    }
    // A live trainer gets the whole timeout for its forward and backward.
    absl::StatusOr<BackwardDone> done =
        hub_->RunBackward(*shared, info, timeout, stream);
    if (done.ok()) {
      has_loss_ = done->has_loss;
      defer_gather_ = done->overlap_param_gather;
      return done->loss;
    }
    if (done.status().code() != absl::StatusCode::kUnavailable) {
      return done.status();
    }
    // The trainer died: the next one to attach redoes this step (it zeroes
    // the grad buffer first); the windows already reduced are kept.
    if (stream != nullptr) ZSHARD_RETURN_IF_ERROR(stream->Restart());
    ZSHARD_LOG_WARN(
        "trainer lost mid-step; waiting for it to come back",
        {{"step", absl::StrCat(step)},
         {"kept_reduced_windows",
          absl::StrCat(stream != nullptr ? stream->reduced_windows() : 0)},
         {"error", std::string(done.status().message())}});
  }
}

void TrainerWorkload::StepFinished(const engine::StepReport& report) {
  TrainerStepResult result;
  result.step = report.step;
  result.failed = !report.ok;
  result.applied = report.applied;
  result.grad_norm = report.grad_norm;
  // A failed step has no world loss (the hub sends no norm either).
  if (report.has_loss && report.ok) result.loss = report.loss;
  result.deferred_gathers = report.deferred_gathers;
  hub_->SendResult(result);
}

void TrainerWorkload::ParamsGathered(int64_t step, int buffer, int bucket,
                                     bool ok) {
  hub_->SendGathered(step, buffer, bucket, ok);
}

absl::StatusOr<std::unique_ptr<engine::Workload>> MakeTrainerWorkload(
    TrainerHub* hub, const job::JobSpec& job, int world, int rank, bool fresh,
    int64_t repeat_through,
    const std::optional<ModelParallelStep>& model_parallel) {
  if (hub == nullptr) {
    return absl::FailedPreconditionError(
        "the job's workload is trainer: start zshard-worker with "
        "--trainer-socket PATH (or set ZSHARD_TRAINER_SOCKET)");
  }
  TrainerWorkload::Options o;
  o.world = world;
  o.rank = rank;
  if (model_parallel.has_value()) {
    o.world = world / model_parallel->context;
    o.rank = model_parallel->replica;
    o.model_parallel = model_parallel;
  }
  o.global_batch = job.workload.global_batch;
  o.steps = job.workload.steps;
  o.repeat_through = repeat_through;
  o.optimizer = job.optimizer;
  o.trainer_timeout_ms = job.workload.trainer_timeout_ms;
  for (const plan::ParamSpec& p : job.model.params) {
    o.param_numels.push_back(p.numel());
  }
  if (fresh) {
    ZSHARD_RETURN_IF_ERROR(hub->WaitForTrainer(o.trainer_timeout_ms));
    ZSHARD_ASSIGN_OR_RETURN(
        o.initial,
        hub->FetchInitialParams(job.model.numel(), o.trainer_timeout_ms));
  }
  return std::make_unique<TrainerWorkload>(hub, std::move(o));
}

}  // namespace zshard::trainer
