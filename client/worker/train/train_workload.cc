// TrainWorkload: the stepping thread, engine construction and the checks
// that keep a run from going on with inconsistent state.

#include "client/worker/train/train_workload.h"

#include <map>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/worker/engine/master_dump.h"
#include "client/worker/engine/workload_factory.h"
#include "common/logging.h"
#include "common/plan/plan.h"
#include "common/status.h"

namespace zshard::worker {
namespace {

void LogMemory(const char* what, int64_t step,
               const engine::MemoryBytes& memory) {
  ZSHARD_LOG_INFO(what, {{"step", absl::StrCat(step)},
                         {"param_bytes", absl::StrCat(memory.param)},
                         {"grad_bytes", absl::StrCat(memory.grad)},
                         {"master_bytes", absl::StrCat(memory.master)},
                         {"exp_avg_bytes", absl::StrCat(memory.exp_avg)},
                         {"exp_avg_sq_bytes", absl::StrCat(memory.exp_avg_sq)},
                         {"comm_bytes", absl::StrCat(memory.comm)},
                         {"total_bytes", absl::StrCat(memory.total())}});
}

}  // namespace

TrainWorkload::TrainWorkload(const Options& options, job::JobSpec job,
                             StoreFactory new_store, TelemetrySink telemetry)
    : options_(options),
      job_(std::move(job)),
      new_store_(std::move(new_store)),
      telemetry_(std::move(telemetry)) {
  thread_ = std::thread([this] { Loop(); });
}

TrainWorkload::~TrainWorkload() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    if (engine_ != nullptr) engine_->Abort();
  }
  thread_.join();
}

void TrainWorkload::OnEpochCommitted(const EpochInfo& epoch) {
  absl::MutexLock lock(&mu_);
  if (engine_ != nullptr && !done_ && epoch.epoch != epoch_.epoch) {
    failure_ = absl::UnimplementedError(absl::StrCat(
        "re-sharding of optimizer state is not supported yet: epoch ",
        epoch.epoch, " changed the membership (world ", epoch_.world, " -> ",
        epoch.world, ", rank ", epoch_.rank, " -> ", epoch.rank,
        ") while this worker holds the state of step ", step_));
    ZSHARD_LOG_ERROR("re-sharding of optimizer state is not supported yet",
                     {{"error", std::string(failure_.message())}});
    engine_->Abort();
  }
  epoch_ = epoch;
}

void TrainWorkload::Activate(int64_t step) {
  absl::MutexLock lock(&mu_);
  // The step is this worker's own until re-sharding exists: a resume step
  // from the coordinator only matters when state moves.
  if (engine_ == nullptr) step_ = step;
  active_ = true;
}

int64_t TrainWorkload::Pause() {
  absl::MutexLock lock(&mu_);
  active_ = false;
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !busy_; };
  mu_.Await(absl::Condition(&idle));
  return step_;
}

void TrainWorkload::Abort() {
  absl::MutexLock lock(&mu_);
  if (engine_ == nullptr || done_) return;
  engine_->Abort();
  if (failure_.ok()) {
    failure_ = absl::AbortedError(
        "collectives aborted by the coordinator (a peer failed)");
    ZSHARD_LOG_ERROR("abort requested, communicators aborted");
  }
}

int64_t TrainWorkload::step() const {
  absl::MutexLock lock(&mu_);
  return step_;
}

bool TrainWorkload::active() const {
  absl::MutexLock lock(&mu_);
  return active_;
}

bool TrainWorkload::done() const {
  absl::MutexLock lock(&mu_);
  return done_;
}

absl::Status TrainWorkload::failure() const {
  absl::MutexLock lock(&mu_);
  return failure_;
}

void TrainWorkload::Fail(const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  if (!failure_.ok()) return;
  failure_ = status;
  ZSHARD_LOG_ERROR("training failed",
                   {{"error", std::string(status.message())}});
}

void TrainWorkload::Loop() {
  while (true) {
    EpochInfo epoch;
    bool build = false;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ ||
               (active_ && failure_.ok() && !done_ && epoch_.rank >= 0);
      };
      mu_.Await(absl::Condition(&ready));
      if (stopping_) return;
      epoch = epoch_;
      build = engine_ == nullptr;
      busy_ = true;
    }
    absl::Status status = build ? BuildEngine(epoch) : RunStep(epoch);
    if (!status.ok()) Fail(status);
    absl::MutexLock lock(&mu_);
    busy_ = false;
    const int64_t delay_ms = build ? 0 : job_.workload.step_delay_ms;
    if (delay_ms > 0 && !done_) {
      auto interrupted = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || !active_;
      };
      mu_.AwaitWithTimeout(absl::Condition(&interrupted),
                           absl::Milliseconds(delay_ms));
    }
  }
}

absl::Status TrainWorkload::BuildEngine(const EpochInfo& epoch) {
  if (epoch.resume_step > 0) {
    return absl::UnimplementedError(absl::StrCat(
        "re-sharding of optimizer state is not supported yet: rank ",
        epoch.rank, " of epoch ", epoch.epoch, " would resume at step ",
        epoch.resume_step, " without optimizer state"));
  }
  absl::StatusOr<plan::Plan> plan =
      plan::MakePlan(job_.model, job::JobPlanOptions(job_, epoch.world));
  if (!plan.ok()) {
    return absl::Status(plan.status().code(),
                        absl::StrCat("plan for world ", epoch.world, ": ",
                                     plan.status().message()));
  }
  if (plan->hash != epoch.plan_hash) {
    return absl::FailedPreconditionError(
        absl::StrCat("plan hash mismatch for world ", epoch.world, " in epoch ",
                     epoch.epoch, ": coordinator '", epoch.plan_hash,
                     "', this worker '", plan->hash, "'"));
  }
  store_ = new_store_(epoch.epoch);
  ZSHARD_ASSIGN_OR_RETURN(workload_,
                          engine::MakeWorkload(job_, epoch.world, epoch.rank));
  engine::EngineConfig config =
      engine::MakeEngineConfig(job_, *plan, epoch.rank, store_.get());
  ZSHARD_ASSIGN_OR_RETURN(
      std::unique_ptr<engine::StepEngine> engine,
      engine::StepEngine::Create(config, options_.engine, *workload_));
  ZSHARD_LOG_INFO("engine ready", {{"epoch", absl::StrCat(epoch.epoch)},
                                   {"rank", absl::StrCat(epoch.rank)},
                                   {"world", absl::StrCat(epoch.world)},
                                   {"instances", absl::StrCat(epoch.instances)},
                                   {"plan_hash", plan->hash}});
  LogMemory("memory", 0, engine->buffers().memory());
  absl::MutexLock lock(&mu_);
  engine_ = std::move(engine);
  return absl::OkStatus();
}

absl::Status TrainWorkload::RunStep(const EpochInfo& epoch) {
  engine::StepEngine* engine = nullptr;
  {
    absl::MutexLock lock(&mu_);
    engine = engine_.get();
  }
  engine::StepResult result = engine->Step(*workload_);
  const engine::StepTelemetry& t = result.telemetry;
  telemetry_(epoch.epoch, t);
  if (!result.status.ok()) {
    engine->Abort();
    return absl::Status(result.status.code(),
                        absl::StrCat("step ", t.step, " failed (",
                                     engine::StepOutcomeName(t.outcome),
                                     "): ", result.status.message()));
  }
  const int64_t step = engine->step();
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
  if (last) {
    LogMemory("memory", step, t.memory);
    if (!options_.dump_master_dir.empty()) {
      ZSHARD_RETURN_IF_ERROR(
          engine::DumpMasters(engine->buffers(), options_.dump_master_dir));
      ZSHARD_LOG_INFO("masters dumped", {{"dir", options_.dump_master_dir},
                                         {"rank", absl::StrCat(epoch.rank)}});
    }
  }
  absl::MutexLock lock(&mu_);
  step_ = step;
  done_ = last;
  return absl::OkStatus();
}

}  // namespace zshard::worker
