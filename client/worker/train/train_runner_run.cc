// TrainRunner: what its thread runs: the preparation of a committed epoch
// and one training step with its logs, checkpoint and final dump.

#include <map>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/worker/engine/master_dump.h"
#include "client/worker/train/step_checkpoint.h"
#include "client/worker/train/train_runner.h"
#include "client/worker/trainer/trainer_workload.h"
#include "common/logging.h"

namespace zshard::worker {

void TrainRunner::TellPosition(const EpochInfo& epoch, BuildInput& input) {
  model_parallel_.reset();
  if (epoch.rank < 0) {  // a spare: its trainer waits
    (void)hub_->SetPosition(std::nullopt, job_.name, {});
    return;
  }
  absl::StatusOr<job::SlotJob> slot =
      job::SlotJobOf(job_, epoch.world, epoch.rank);
  if (!slot.ok()) return;  // BuildEpoch fails on it
  // A trainer of another slot is refused here (and told why).
  (void)hub_->SetPosition(PositionOf(job_, *slot), job_.name, slot->spec.model);
  input.before_workload = [this, &epoch](const job::SlotJob& slot,
                                         comm::KvStore& store) {
    absl::StatusOr<trainer::ModelParallelStep> met = rendezvous_.Meet(
        job_, epoch, slot, store, options_.engine.comm_timeout_ms);
    if (!met.ok()) return met.status();
    model_parallel_ = *std::move(met);
    return absl::OkStatus();
  };
}

int64_t TrainRunner::RunTransition(const EpochInfo& epoch) {
  BuildInput input;
  input.job = &job_;
  input.options = options_.engine;
  input.epoch = epoch;
  input.new_store = new_store_;
  input.cancelled = &transition_abort_;
  if (job_.workload.kind == job::WorkloadKind::kTrainer) {
    // The trainer maps the params and grads: no copy in the hand-off.
    input.options.shared_buffers = true;
    if (!hub_status_.ok()) {
      Fail(hub_status_);
      return 0;
    }
    input.make_workload = [this, repeat = epoch.repeat_through](
                              const job::JobSpec& job, int world, int rank,
                              bool fresh) {
      return trainer::MakeTrainerWorkload(hub_.get(), job, world, rank, fresh,
                                          repeat, model_parallel_);
    };
    if (job_.parallel.model_parallel() && hub_ != nullptr) {
      TellPosition(epoch, input);
    }
  }
  HeldEngine* base = nullptr;
  {
    absl::MutexLock lock(&mu_);
    if (base_ != nullptr && base_->epoch.epoch == epoch.base_epoch) {
      base = base_.get();
    }
    input.base_commit_pending = commit_pending_;
  }
  input.base = base;
  input.set_mover = [this](reshard::StateMover* mover) {
    absl::MutexLock lock(&mu_);
    mover_ = mover;
    if (mover != nullptr && CancelledLocked()) mover->Abort();
  };
  input.set_engine = [this](engine::StepEngine* engine) {
    absl::MutexLock lock(&mu_);
    creating_ = engine;
    if (engine != nullptr && CancelledLocked()) engine->Abort();
  };
  absl::StatusOr<std::unique_ptr<HeldEngine>> held =
      injected_failures_left_ > 0
          ? absl::UnavailableError("injected preparation fault")
          : BuildEpoch(std::move(input));
  if (injected_failures_left_ > 0) --injected_failures_left_;
  std::unique_ptr<HeldEngine> discard;
  {
    absl::MutexLock lock(&mu_);
    if (base != nullptr && base->engine != nullptr &&
        base->engine->step() != step_) {
      // The base engine finished its pending step.
      step_ = base->engine->step();
      adam_step_ = base->engine->adam_step();
      commit_pending_ = false;
    }
    if (held.ok() && CancelledLocked()) {
      discard = *std::move(held);
    } else if (held.ok()) {
      next_ = *std::move(held);
      ZSHARD_LOG_INFO(
          next_->engine != nullptr ? "engine ready" : "state handed over",
          {{"epoch", absl::StrCat(epoch.epoch)},
           {"rank", absl::StrCat(epoch.rank)},
           {"world", absl::StrCat(epoch.world)},
           {"instances", absl::StrCat(epoch.instances)},
           {"resume_step", absl::StrCat(epoch.resume_step)},
           {"plan_hash", epoch.plan_hash}});
      return epoch.epoch;
    }
  }
  if (held.ok()) return 0;
  bool cancelled = false;
  {
    absl::MutexLock lock(&mu_);
    cancelled = CancelledLocked();
  }
  const FailureReporter& report = callbacks_.report_failure;
  if (!cancelled && report) {
    // The coordinator decides what comes next (another source, an older
    // checkpoint, the job's end); a worker log alone would be silence.
    report(PreparationFailure(epoch, held.status()));
  }
  if (cancelled || IsRecoverable(held.status())) {
    ZSHARD_LOG_WARN("epoch preparation failed, waiting for a new epoch",
                    {{"epoch", absl::StrCat(epoch.epoch)},
                     {"error", std::string(held.status().message())}});
    return 0;
  }
  Fail(held.status());
  return 0;
}

void TrainRunner::RunStep(HeldEngine* held, bool stop) {
  engine::StepEngine& engine = *held->engine;
  engine::StepResult result = engine.Step(*held->workload, stop);
  const engine::StepTelemetry& t = result.telemetry;
  telemetry_(held->epoch.epoch, t);
  if (!result.status.ok()) {
    ZSHARD_LOG_WARN(
        "step failed, keeping the state and waiting for a new "
        "epoch",
        {{"step", absl::StrCat(t.step)},
         {"outcome", engine::StepOutcomeName(t.outcome)},
         {"commit_pending", result.commit_pending ? "true" : "false"},
         {"error", std::string(result.status.message())}});
    engine.Abort();
    // A workload that cannot go on here (its trainer gone for good): leave
    // as on SIGTERM, handing the intact state over. Otherwise the
    // coordinator hears of the failure: when every member is alive, no
    // lease expires to start the next epoch.
    const LeaveRequester& leave = callbacks_.leave;
    const FailureReporter& report = callbacks_.report_failure;
    if (std::optional<std::string> why = held->workload->LeaveReason()) {
      if (leave) leave(*why);
    } else if (report) {
      RunnerFailure failure;
      failure.kind = RunnerFailure::Kind::kStep;
      failure.epoch = held->epoch.epoch;
      failure.step = t.step;
      failure.rank = held->epoch.rank;
      failure.error = std::string(result.status.message());
      NameFailedPeer(held->epoch, result.status, &failure);
      report(failure);
    }
    absl::MutexLock lock(&mu_);
    held->broken = true;
    DeactivateLocked();
    step_ = engine.step();
    adam_step_ = engine.adam_step();
    commit_pending_ = result.commit_pending;
    if (!result.commit_values.empty()) commit_values_ = result.commit_values;
    return;
  }
  AfterStep(held, t);
  absl::MutexLock lock(&mu_);
  step_ = engine.step();
  adam_step_ = engine.adam_step();
  commit_pending_ = false;
  commit_values_ = result.commit_values;
  const int64_t steps = job_.workload.steps;
  if (steps > 0 && step_ >= steps) SetSteppingLocked(TrainStepping::kDone);
  // Every rank saw the same flag: all stop after this same step. A rank
  // that asked stops even if the engine did not carry the flag.
  if (result.stop || stop) DeactivateLocked();
}

void TrainRunner::AfterStep(HeldEngine* held, const engine::StepTelemetry& t) {
  const engine::StepEngine& engine = *held->engine;
  const int64_t step = engine.step();
  const int64_t steps = job_.workload.steps;
  const bool last = steps > 0 && step >= steps;
  if (step == 1 || last ||
      (options_.log_every > 0 && step % options_.log_every == 0)) {
    std::map<std::string, std::string> fields = {
        {"step", absl::StrCat(step)},
        {"outcome", engine::StepOutcomeName(t.outcome)},
        {"grad_norm", absl::StrCat(t.grad_norm)},
        {"step_ms", absl::StrCat(t.times.step * 1e3)}};
    if (t.has_loss) fields["loss"] = absl::StrCat(t.loss);
    ZSHARD_LOG_INFO("step", fields);
  }
  if (IsCheckpointStep(job_.checkpoint, held->epoch.instance, step)) {
    // Logged and reported inside; a failed checkpoint never stops training.
    (void)WriteStepCheckpoint(job_, held->epoch, engine,
                              callbacks_.report_checkpoint,
                              callbacks_.report_failure);
  }
  if (!last) return;
  // The trainer's begin_step returns None from now on.
  if (hub_ != nullptr) hub_->SendDone();
  LogEngineMemory("memory", step, t.memory);
  if (options_.dump_master_dir.empty()) return;
  // A model-parallel job's slots dump into a folder each: their plans and
  // param indices are their own.
  std::string dir = options_.dump_master_dir;
  if (job_.parallel.model_parallel()) {
    absl::StatusOr<job::SlotJob> slot =
        job::SlotJobOf(job_, held->epoch.world, held->epoch.rank);
    if (!slot.ok()) {
      Fail(slot.status());
      return;
    }
    dir = absl::StrCat(dir, "/slot-", slot->slot);
  }
  absl::Status dumped = engine::DumpMasters(engine.buffers(), dir);
  if (!dumped.ok()) {
    Fail(dumped);
    return;
  }
  ZSHARD_LOG_INFO("masters dumped",
                  {{"dir", dir}, {"rank", absl::StrCat(held->epoch.rank)}});
}

}  // namespace zshard::worker
