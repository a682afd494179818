// The runner of the `idle` workload kind: a counter that advances one step
// every step_delay_ms while the worker's epoch is ACTIVE. It does no math; it
// lets the control plane (joins, transitions, failures) be run and broken on
// its own. Transitions stop it at a step boundary.
#pragma once

#include <cstdint>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "client/worker/runner/runner.h"
#include "common/job/job_spec.h"

namespace zshard::worker {

// Steps on its own thread. Thread-safe: the session thread calls Activate /
// Pause while the stepping thread runs.
class IdleRunner : public Runner {
 public:
  struct Options {
    // Time between steps (the job spec's default); 0 steps as fast as
    // possible.
    int64_t step_delay_ms = job::WorkloadSpec().step_delay_ms;
    // Steps after which the runner is done; 0 (default) runs until
    // stopped.
    int64_t steps = 0;
  };

  explicit IdleRunner(const Options& options);
  // Stops the stepping thread.
  ~IdleRunner() override;
  IdleRunner(const IdleRunner&) = delete;
  IdleRunner& operator=(const IdleRunner&) = delete;

  // No state, no preparation: every epoch is ready at once, nothing to
  // abort, no failure.
  void OnProposed(int64_t epoch, int64_t base_epoch) override;
  EpochStart OnEpochCommitted(const EpochInfo& epoch) override;
  void OnEpochStable(int64_t epoch) override;
  // step() with as many Adam updates, nothing pending.
  PreparedState prepared_state() const override;
  void Abort() override;
  absl::Status failure() const override;
  void OnJobEnd(bool, const std::string&) override {}
  void OnWaiting(const std::string&) override {}

  // Starts stepping from `step` (the last completed step; the next step is
  // step + 1). Called when an epoch becomes ACTIVE.
  void Activate(int64_t step) override;

  // Stops at the next step boundary and returns the last completed step.
  // Blocks at most one step's bookkeeping (never a whole step delay: the
  // delay between steps is interruptible). Idempotent.
  int64_t Pause() override;

  // Last completed step.
  int64_t step() const override;
  // True while stepping is allowed.
  bool active() const override;
  // True once `steps` steps are done (never when steps == 0).
  bool done() const override;

  // Blocks until done() or `timeout_ms` passes; returns done().
  bool WaitDone(int64_t timeout_ms) const;

 private:
  void Loop();

  const Options options_;
  mutable absl::Mutex mu_;
  int64_t step_ ABSL_GUARDED_BY(mu_) = 0;
  bool active_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Bumped by every Activate/Pause so a delay in progress restarts.
  int64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace zshard::worker
