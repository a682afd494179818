// TrainWorkload: the training path of the worker daemon (synthetic and
// regression workloads). When a committed epoch gives this worker a rank it
// recomputes the plan, checks the coordinator's hash, builds the ZeRO-1
// step engine with communicators rendezvoused through the epoch's store,
// and steps until the job's steps are done, streaming telemetry per step;
// after the last step it dumps the owned fp32 masters when asked to.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "client/worker/comm/kv_store.h"
#include "client/worker/engine/step_engine.h"
#include "client/worker/engine/workload.h"
#include "client/worker/workload/stepping_workload.h"
#include "common/job/job_spec.h"

namespace zshard::worker {

// Steps on its own thread. Thread-safe (see SteppingWorkload). Failures
// are final: a plan hash mismatch, an engine that cannot be built, a failed
// step, or a membership change while holding optimizer state (re-sharding
// is not supported yet); failure() then says why.
class TrainWorkload : public SteppingWorkload {
 public:
  struct Options {
    // Directory for the --dump-master files after the last step; empty
    // (default): no dump. Spares write nothing.
    std::string dump_master_dir;
    // The engine's options (collective timeout, threads, ...). Defaults
    // of EngineOptions.
    engine::EngineOptions engine;
    // Log a "step" line every this many steps (and the first and last).
    // Default 10.
    int64_t log_every = 10;
  };
  // A rendezvous store scoped to `epoch`.
  using StoreFactory =
      std::function<std::unique_ptr<comm::KvStore>(int64_t epoch)>;
  // Receives each step's telemetry; must not block long and cannot fail.
  using TelemetrySink =
      std::function<void(int64_t epoch, const engine::StepTelemetry&)>;

  // `job`'s workload kind must be synthetic or regression.
  TrainWorkload(const Options& options, job::JobSpec job,
                StoreFactory new_store, TelemetrySink telemetry);
  // Stops the stepping thread (after the step in progress).
  ~TrainWorkload() override;
  TrainWorkload(const TrainWorkload&) = delete;
  TrainWorkload& operator=(const TrainWorkload&) = delete;

  void OnEpochCommitted(const EpochInfo& epoch) override;
  void Activate(int64_t step) override;
  // Blocks until the step (or engine build) in progress ends.
  int64_t Pause() override;
  void Abort() override;
  int64_t step() const override;
  bool active() const override;
  bool done() const override;
  absl::Status failure() const override;

 private:
  void Loop();
  // Builds the engine for `epoch`.
  absl::Status BuildEngine(const EpochInfo& epoch);
  // Runs one step; after the last one dumps the masters and sets done_.
  absl::Status RunStep(const EpochInfo& epoch);
  void Fail(const absl::Status& status);

  const Options options_;
  const job::JobSpec job_;
  const StoreFactory new_store_;
  const TelemetrySink telemetry_;

  // Used by the stepping thread only (engine_ is also read under mu_ by
  // Abort, and set under mu_).
  std::unique_ptr<comm::KvStore> store_;
  std::unique_ptr<engine::Workload> workload_;

  mutable absl::Mutex mu_;
  std::unique_ptr<engine::StepEngine> engine_ ABSL_GUARDED_BY(mu_);
  EpochInfo epoch_ ABSL_GUARDED_BY(mu_);
  int64_t step_ ABSL_GUARDED_BY(mu_) = 0;
  bool active_ ABSL_GUARDED_BY(mu_) = false;
  bool busy_ ABSL_GUARDED_BY(mu_) = false;  // a step or build in progress
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace zshard::worker
