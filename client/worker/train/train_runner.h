// TrainRunner: the training path of the worker daemon (synthetic and
// regression workloads). It holds the state of its base (stable) epoch: the
// engine that last stepped. A committed epoch is prepared on its own thread
// (EpochBuilder: finish a pending step, move state, build the new engine)
// while the base state is kept; the new engine replaces it when the epoch
// is stable, and only then steps. Steps stop at a boundary every rank
// agrees on (the stop flag rides on the commit all-reduce). A failed step
// keeps the state and waits for the next proposal. Ranks of instance 0
// write checkpoints; after the last step a rank dumps its owned fp32
// masters when asked to.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "client/worker/comm/kv_store.h"
#include "client/worker/engine/step_engine.h"
#include "client/worker/reshard/state_mover.h"
#include "client/worker/runner/runner.h"
#include "client/worker/train/epoch_builder.h"
#include "client/worker/train/train_states.h"
#include "client/worker/train/trainer_rendezvous.h"
#include "client/worker/trainer/trainer_hub.h"
#include "common/job/job_spec.h"

namespace zshard::worker {

// Steps and prepares epochs on its own thread. Thread-safe (see
// Runner). Final failures (failure() says why): a plan hash
// mismatch, an engine that cannot be built for a reason other than a
// failed peer, a broken invariant of the moves.
class TrainRunner : public Runner {
 public:
  struct Options {
    // Directory for the --dump-master files after the last step; empty
    // (default): no dump. Only a rank holding state at the last step
    // writes.
    std::string dump_master_dir;
    // The engine's options (collective timeout, threads, ...). Defaults
    // of EngineOptions.
    engine::EngineOptions engine;
    // Log a "step" line every this many steps (and the first and last).
    // Default 10.
    int64_t log_every = 10;
    // Fault injection for tests: the first this many preparations of a
    // committed epoch fail (Unavailable, reported to the coordinator as a
    // real failure is). Default 0: none.
    int inject_prepare_failures = 0;
    // Path of the Unix socket a trainer process attaches to, for jobs of
    // the trainer workload (--trainer-socket, $ZSHARD_TRAINER_SOCKET).
    // Default empty: such a job fails at its first epoch naming the flag.
    std::string trainer_socket;
    // A hub already listening on trainer_socket (the session started it to
    // take the model of a job that had none from its trainer): used
    // instead of a new one, with the job's name and model adopted. Default
    // null.
    std::shared_ptr<trainer::TrainerHub> trainer_hub;
    // A model-parallel trainer job: the port of the TCPStore that this
    // daemon's trainer hosts for its replica when it is the replica's rank
    // 0 (--trainer-store-port). Default 0: a free port, picked once.
    int trainer_store_port = 0;
  };
  using StoreFactory = worker::StoreFactory;
  // Receives each step's telemetry; must not block long and cannot fail.
  using TelemetrySink =
      std::function<void(int64_t epoch, const engine::StepTelemetry&)>;

  // `job`'s workload kind must be synthetic or regression.
  TrainRunner(const Options& options, job::JobSpec job, StoreFactory new_store,
              TelemetrySink telemetry, Callbacks callbacks);
  // Aborts what is in progress and stops the thread.
  ~TrainRunner() override;
  TrainRunner(const TrainRunner&) = delete;
  TrainRunner& operator=(const TrainRunner&) = delete;

  void OnProposed(int64_t epoch, int64_t base_epoch) override;
  EpochStart OnEpochCommitted(const EpochInfo& epoch) override;
  void OnEpochStable(int64_t epoch) override;
  void Activate(int64_t step) override;
  // A stepping rank finishes steps until every rank agrees to stop (at
  // most one more step); an epoch being prepared is aborted. Blocks until
  // nothing runs.
  int64_t Pause() override;
  PreparedState prepared_state() const override;
  void Abort() override;
  int64_t step() const override;
  bool active() const override;
  bool done() const override;
  absl::Status failure() const override;
  // Tells the trainer (a spare's too) that the job ended.
  void OnJobEnd(bool failed, const std::string& reason) override;
  // Passed to the trainer (TrainerHub::SetWaiting).
  void OnWaiting(const std::string& why) override;

  // The epoch whose engine steps (0: none yet) and this worker's rank in it
  // (-1: none). For tests and logs.
  int64_t base_epoch() const;
  int base_rank() const;

 private:
  void Loop();
  bool CanStepLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool HasWorkLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs the queued commit; returns the epoch to report ready (0: none).
  int64_t RunTransition(const EpochInfo& epoch);
  // A model-parallel trainer job: tells the hub this rank's position (its
  // trainer's slot) and has `input` meet the replica's other daemons for
  // the trainers' rendezvous before the workload is made.
  void TellPosition(const EpochInfo& epoch, BuildInput& input);
  // Applies a stable epoch; returns state to free outside the lock.
  std::vector<std::unique_ptr<HeldEngine>> ApplyStableLocked(int64_t epoch)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RunStep(HeldEngine* held, bool stop);
  void AfterStep(HeldEngine* held, const engine::StepTelemetry& t);
  void Fail(const absl::Status& status);
  // Cancels the preparation in progress, if any.
  void CancelTransitionLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Changes the life cycles through their tables.
  void SetActivityLocked(TrainActivity to) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SetSteppingLocked(TrainStepping to) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Stepping allowed (kActive, kStopping).
  bool ActiveLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A step or a preparation runs.
  bool BusyLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The preparation in progress must give up (cancelled or shutting down).
  bool CancelledLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Stepping stops: kActive -> kInactive, kStopping -> kPausing.
  void DeactivateLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  const job::JobSpec job_;
  const StoreFactory new_store_;
  const TelemetrySink telemetry_;
  const Callbacks callbacks_;
  // The trainer socket (jobs of the trainer workload with a socket path),
  // or why it could not be opened (reported at the first epoch).
  std::shared_ptr<trainer::TrainerHub> hub_;
  absl::Status hub_status_;
  // A model-parallel trainer job's rendezvous, and the position of the
  // epoch being prepared (the runner's thread only).
  TrainerRendezvous rendezvous_;
  std::optional<trainer::ModelParallelStep> model_parallel_;

  mutable absl::Mutex mu_;
  // The stable epoch's state (the engine that steps), and a committed
  // epoch prepared but not yet stable.
  std::unique_ptr<HeldEngine> base_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<HeldEngine> next_ ABSL_GUARDED_BY(mu_);
  // Work for the thread: a committed epoch to prepare, a stable epoch.
  std::optional<EpochInfo> commit_request_ ABSL_GUARDED_BY(mu_);
  int64_t stable_request_ ABSL_GUARDED_BY(mu_) = 0;
  // The engine being created from moved state (its parameter all-gather in
  // progress), for Abort.
  engine::StepEngine* creating_ ABSL_GUARDED_BY(mu_) = nullptr;
  // The mover of the transition in progress (for Abort).
  reshard::StateMover* mover_ ABSL_GUARDED_BY(mu_) = nullptr;
  // The two life cycles (train_states.h).
  TrainActivity activity_ ABSL_GUARDED_BY(mu_) = TrainActivity::kIdle;
  TrainStepping stepping_ ABSL_GUARDED_BY(mu_) = TrainStepping::kInactive;
  // Raised when a preparation is cancelled: ends its rendezvous waits
  // promptly (read without the lock by the epoch's store).
  std::atomic<bool> transition_abort_{false};
  // Injected preparation failures still to come (the runner's thread only).
  int injected_failures_left_ = 0;
  int64_t step_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t adam_step_ ABSL_GUARDED_BY(mu_) = 0;
  // Data of the state, not of the life cycle: whether the commit
  // all-reduce of step_ + 1 failed after this rank contributed, and the
  // last commit all-reduce's result (when known).
  bool commit_pending_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<double> commit_values_ ABSL_GUARDED_BY(mu_);
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace zshard::worker
