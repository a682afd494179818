// TrainRunner: the stepping thread, epoch preparation and the hand-over
// from the base epoch's engine to the next one.

#include "client/worker/train/train_runner.h"

#include <map>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/logging.h"
#include "common/status.h"

namespace zshard::worker {
TrainRunner::TrainRunner(const Options& options, job::JobSpec job,
                         StoreFactory new_store, TelemetrySink telemetry,
                         Callbacks callbacks)
    : options_(options),
      job_(std::move(job)),
      new_store_(std::move(new_store)),
      telemetry_(std::move(telemetry)),
      callbacks_(std::move(callbacks)),
      rendezvous_(options.engine.hostname, options.trainer_store_port),
      injected_failures_left_(options.inject_prepare_failures) {
  if (job_.workload.kind == job::WorkloadKind::kTrainer &&
      !options_.trainer_socket.empty()) {
    auto on_event = [this](const std::string& kind, const std::string& reason) {
      const FailureReporter& report = callbacks_.report_failure;
      if (!report) return;
      RunnerFailure event;
      event.kind = RunnerFailure::Kind::kEvent;
      event.event_kind = kind;
      event.error = reason;
      report(event);
    };
    if (options_.trainer_hub != nullptr) {
      hub_ = options_.trainer_hub;
      hub_->SetEventHandler(on_event);
      // A trainer whose model is not the job's is refused here (and told).
      (void)hub_->AdoptJob(job_.name, job_.model);
    } else {
      trainer::TrainerHubOptions o;
      o.socket_path = options_.trainer_socket;
      o.job_name = job_.name;
      o.model = job_.model;
      o.on_event = on_event;
      absl::StatusOr<std::unique_ptr<trainer::TrainerHub>> hub =
          trainer::TrainerHub::Start(o);
      if (hub.ok()) {
        hub_ = *std::move(hub);
        ZSHARD_LOG_INFO("waiting for a trainer",
                        {{"socket", options_.trainer_socket}});
      } else {
        hub_status_ = hub.status();
      }
    }
  }
  thread_ = std::thread([this] { Loop(); });
}

TrainRunner::~TrainRunner() {
  {
    absl::MutexLock lock(&mu_);
    CancelTransitionLocked();
    SetActivityLocked(TrainActivity::kShutdown);
    if (base_ != nullptr && base_->engine != nullptr) base_->engine->Abort();
    if (next_ != nullptr && next_->engine != nullptr) next_->engine->Abort();
  }
  // Ends a wait for the trainer (its step fails, the state stays).
  if (hub_ != nullptr) hub_->Shutdown();
  thread_.join();
}

void TrainRunner::SetActivityLocked(TrainActivity to) {
  TrainActivityTable().Advance(activity_, to);
}

void TrainRunner::SetSteppingLocked(TrainStepping to) {
  TrainSteppingTable().Advance(stepping_, to);
}

bool TrainRunner::ActiveLocked() const {
  return stepping_ == TrainStepping::kActive ||
         stepping_ == TrainStepping::kStopping;
}

bool TrainRunner::BusyLocked() const {
  return activity_ == TrainActivity::kStepping ||
         activity_ == TrainActivity::kPreparing ||
         activity_ == TrainActivity::kCancelling;
}

bool TrainRunner::CancelledLocked() const {
  return activity_ == TrainActivity::kCancelling ||
         activity_ == TrainActivity::kShutdown;
}

void TrainRunner::DeactivateLocked() {
  if (stepping_ == TrainStepping::kActive) {
    SetSteppingLocked(TrainStepping::kInactive);
  } else if (stepping_ == TrainStepping::kStopping) {
    SetSteppingLocked(TrainStepping::kPausing);
  }
}

void TrainRunner::CancelTransitionLocked() {
  if (activity_ != TrainActivity::kPreparing &&
      activity_ != TrainActivity::kCancelling) {
    return;
  }
  SetActivityLocked(TrainActivity::kCancelling);
  transition_abort_.store(true);
  if (mover_ != nullptr) mover_->Abort();
  if (creating_ != nullptr) creating_->Abort();
}

bool TrainRunner::CanStepLocked() const {
  return ActiveLocked() && failure_.ok() && base_ != nullptr &&
         base_->engine != nullptr && !base_->broken && next_ == nullptr &&
         !commit_request_.has_value() && stable_request_ == 0;
}

bool TrainRunner::HasWorkLocked() const {
  return activity_ == TrainActivity::kShutdown || commit_request_.has_value() ||
         stable_request_ > 0 || CanStepLocked();
}

void TrainRunner::OnProposed(int64_t epoch, int64_t base_epoch) {
  std::vector<std::unique_ptr<HeldEngine>> garbage;
  {
    absl::MutexLock lock(&mu_);
    // A stable epoch not yet applied is the proposal's base at most.
    stable_request_ = 0;
    commit_request_.reset();
    if (next_ != nullptr && next_->epoch.epoch == base_epoch) {
      // The epoch became stable while this worker missed it.
      garbage.push_back(std::move(base_));
      base_ = std::move(next_);
    } else if (next_ != nullptr) {
      // The next epoch broke before it was stable: its state goes, the
      // base epoch's stays.
      ZSHARD_LOG_INFO("dropping the state of an unstable epoch",
                      {{"epoch", absl::StrCat(next_->epoch.epoch)},
                       {"proposed", absl::StrCat(epoch)},
                       {"base_epoch", absl::StrCat(base_epoch)}});
      garbage.push_back(std::move(next_));
    }
    if (base_ != nullptr && base_->epoch.epoch != base_epoch) {
      ZSHARD_LOG_INFO("dropping state the proposal does not build on",
                      {{"epoch", absl::StrCat(base_->epoch.epoch)},
                       {"base_epoch", absl::StrCat(base_epoch)}});
      garbage.push_back(std::move(base_));
    }
  }
  garbage.clear();  // outside the lock: engines close their connections
}

EpochStart TrainRunner::OnEpochCommitted(const EpochInfo& epoch) {
  absl::MutexLock lock(&mu_);
  if (epoch.rank < 0 && !SendsState(epoch)) return EpochStart::kReady;
  commit_request_ = epoch;
  return EpochStart::kPending;
}

void TrainRunner::OnEpochStable(int64_t epoch) {
  absl::MutexLock lock(&mu_);
  stable_request_ = std::max(stable_request_, epoch);
}

void TrainRunner::Activate(int64_t step) {
  absl::MutexLock lock(&mu_);
  if (base_ == nullptr && next_ == nullptr) step_ = step;
  if (stepping_ != TrainStepping::kDone) {
    SetSteppingLocked(TrainStepping::kActive);
  }
}

int64_t TrainRunner::Pause() {
  absl::MutexLock lock(&mu_);
  CancelTransitionLocked();
  // A commit not started yet is superseded by whatever paused it.
  commit_request_.reset();
  // A stepping rank runs until the step that carries the stop flag (its own
  // or a peer's) ends; anything else stops at once. A stable epoch still
  // queued is applied first (it may start stepping: the flag stops it).
  if (stepping_ == TrainStepping::kActive) {
    SetSteppingLocked(TrainStepping::kStopping);
  } else if (stepping_ == TrainStepping::kInactive) {
    SetSteppingLocked(TrainStepping::kPausing);
  }
  auto stopped = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !BusyLocked() && stable_request_ == 0 && !CanStepLocked();
  };
  mu_.Await(absl::Condition(&stopped));
  if (stepping_ != TrainStepping::kDone) {
    SetSteppingLocked(TrainStepping::kInactive);
  }
  return step_;
}

PreparedState TrainRunner::prepared_state() const {
  absl::MutexLock lock(&mu_);
  PreparedState state;
  state.step = step_;
  state.adam_step = adam_step_;
  state.commit_pending = commit_pending_;
  state.commit_values = commit_values_;
  return state;
}

void TrainRunner::Abort() {
  absl::MutexLock lock(&mu_);
  if (stepping_ == TrainStepping::kDone) return;
  bool aborted = activity_ == TrainActivity::kPreparing;
  CancelTransitionLocked();
  for (HeldEngine* held : {base_.get(), next_.get()}) {
    if (held == nullptr || held->engine == nullptr || held->broken) continue;
    held->engine->Abort();
    held->broken = true;
    aborted = true;
  }
  if (aborted) {
    ZSHARD_LOG_WARN(
        "abort requested, communicators aborted; waiting for a "
        "new epoch");
  }
}

int64_t TrainRunner::step() const {
  absl::MutexLock lock(&mu_);
  return step_;
}

bool TrainRunner::active() const {
  absl::MutexLock lock(&mu_);
  return ActiveLocked();
}

bool TrainRunner::done() const {
  absl::MutexLock lock(&mu_);
  return stepping_ == TrainStepping::kDone;
}

void TrainRunner::OnJobEnd(bool failed, const std::string& reason) {
  if (hub_ != nullptr) hub_->SendDone(failed, reason);
}

void TrainRunner::OnWaiting(const std::string& why) {
  if (hub_ != nullptr) hub_->SetWaiting(why);
}

absl::Status TrainRunner::failure() const {
  absl::MutexLock lock(&mu_);
  return failure_;
}

int64_t TrainRunner::base_epoch() const {
  absl::MutexLock lock(&mu_);
  return base_ != nullptr ? base_->epoch.epoch : 0;
}

int TrainRunner::base_rank() const {
  absl::MutexLock lock(&mu_);
  return base_ != nullptr ? base_->epoch.rank : -1;
}

void TrainRunner::Fail(const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  if (!failure_.ok()) return;
  failure_ = status;
  ZSHARD_LOG_ERROR("training failed",
                   {{"error", std::string(status.message())}});
}

std::vector<std::unique_ptr<HeldEngine>> TrainRunner::ApplyStableLocked(
    int64_t epoch) {
  std::vector<std::unique_ptr<HeldEngine>> garbage;
  if (next_ != nullptr && next_->epoch.epoch == epoch) {
    garbage.push_back(std::move(base_));
    base_ = std::move(next_);
  } else if (base_ == nullptr || base_->epoch.epoch != epoch) {
    // This worker holds nothing in `epoch` (it only sent state, or joined
    // later): its old state goes.
    if (base_ != nullptr && base_->epoch.epoch < epoch) {
      garbage.push_back(std::move(base_));
    }
    if (next_ != nullptr && next_->epoch.epoch < epoch) {
      garbage.push_back(std::move(next_));
    }
  }
  const int rank =
      base_ != nullptr && base_->epoch.epoch == epoch ? base_->epoch.rank : -1;
  if (rank >= 0 && base_->engine != nullptr) {
    step_ = base_->engine->step();
    adam_step_ = base_->engine->adam_step();
    commit_pending_ = false;
    if (!base_->broken) {
      // Stepping starts (up to the stop when a Pause waits).
      if (stepping_ == TrainStepping::kInactive) {
        SetSteppingLocked(TrainStepping::kActive);
      } else if (stepping_ == TrainStepping::kPausing) {
        SetSteppingLocked(TrainStepping::kStopping);
      }
    }
    LogEngineMemory("memory", step_, base_->engine->buffers().memory());
  }
  return garbage;
}

void TrainRunner::Loop() {
  while (true) {
    std::optional<EpochInfo> commit;
    HeldEngine* stepping = nullptr;
    bool stop = false;
    std::vector<std::unique_ptr<HeldEngine>> garbage;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &TrainRunner::HasWorkLocked));
      if (activity_ == TrainActivity::kShutdown) return;
      if (commit_request_.has_value()) {
        commit = std::move(commit_request_);
        commit_request_.reset();
        transition_abort_.store(false);
        SetActivityLocked(TrainActivity::kPreparing);
      } else if (stable_request_ > 0) {
        const int64_t epoch = stable_request_;
        stable_request_ = 0;
        garbage = ApplyStableLocked(epoch);
      } else {
        stepping = base_.get();
        stop = stepping_ == TrainStepping::kStopping;
        SetActivityLocked(TrainActivity::kStepping);
      }
    }
    garbage.clear();  // outside the lock: engines close their connections
    if (commit.has_value()) {
      const int64_t ready = RunTransition(*commit);
      {
        absl::MutexLock lock(&mu_);
        if (activity_ != TrainActivity::kShutdown) {
          SetActivityLocked(TrainActivity::kIdle);
        }
      }
      if (ready > 0 && callbacks_.ready) callbacks_.ready(ready);
      continue;
    }
    if (stepping != nullptr) {
      RunStep(stepping, stop);
      absl::MutexLock lock(&mu_);
      if (activity_ != TrainActivity::kShutdown) {
        SetActivityLocked(TrainActivity::kIdle);
      }
      // A trainer job is paced by its trainers, not by a delay.
      const int64_t delay_ms = job_.workload.kind == job::WorkloadKind::kTrainer
                                   ? 0
                                   : job_.workload.step_delay_ms;
      if (delay_ms > 0 && CanStepLocked() &&
          stepping_ == TrainStepping::kActive) {
        auto interrupted = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return activity_ == TrainActivity::kShutdown ||
                 stepping_ != TrainStepping::kActive ||
                 commit_request_.has_value() || stable_request_ > 0;
        };
        mu_.AwaitWithTimeout(absl::Condition(&interrupted),
                             absl::Milliseconds(delay_ms));
      }
    }
  }
}

}  // namespace zshard::worker
