// SteppingWorkload: what the worker's session drives. Transitions stop it
// at a step boundary and resume it; the session reports its step in
// heartbeats and ends when it is done or has failed. Implemented by the
// idle counter and by the training workload.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace zshard::worker {

// A committed epoch as this worker sees it.
struct EpochInfo {
  int64_t epoch = 0;
  int rank = -1;  // -1: spare or not a member
  int world = 0;
  int instances = 1;
  std::string plan_hash;  // the coordinator's plan hash for `world`
  int64_t resume_step = 0;
};

// Thread-safe: the session's threads call every method concurrently.
class SteppingWorkload {
 public:
  virtual ~SteppingWorkload() = default;

  // Told before Activate/Pause when a new committed epoch is applied
  // (not on replays of the same epoch). Default: nothing.
  virtual void OnEpochCommitted(const EpochInfo& epoch) { (void)epoch; }

  // Starts stepping from `step` (the last completed step).
  virtual void Activate(int64_t step) = 0;
  // Stops at the next step boundary; returns the last completed step.
  virtual int64_t Pause() = 0;
  // The coordinator asked to abort the epoch's collectives. Default:
  // nothing (no collectives).
  virtual void Abort() {}

  // Last completed step.
  virtual int64_t step() const = 0;
  // True while stepping is allowed.
  virtual bool active() const = 0;
  // True once the job's steps are done.
  virtual bool done() const = 0;
  // OK, or the error that stopped the workload for good (the worker then
  // leaves and exits 1).
  virtual absl::Status failure() const { return absl::OkStatus(); }
};

}  // namespace zshard::worker
