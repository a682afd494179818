// The job's life cycle as the coordinator sees it: one phase enum, one
// table of allowed steps, and why the job failed.
#pragma once

#include <optional>
#include <string>

namespace zshard::server {

enum class JobPhase {
  // Members join, epochs are proposed and trained (the forming job too).
  kRunning,
  // Every rank of the stable epoch reached the workload's last step: no
  // more proposals; heartbeats tell the members to exit.
  kFinished,
  // The job cannot go on (state lost with no checkpoint to restore): no
  // more proposals; heartbeats tell the members to exit with the reason.
  kFailed,
};

enum class JobEvent {
  kFinish,  // every rank reached the last step
  kFail,    // the state cannot be recovered
};

// "RUNNING", "FINISHED", "FAILED".
const char* JobPhaseName(JobPhase phase);
// "finish", "fail".
const char* JobEventName(JobEvent event);

// The phase after `event` in `phase`, or nullopt when the table refuses
// the step. Allowed:
//   RUNNING  --finish--> FINISHED
//   RUNNING  --fail----> FAILED
//   FINISHED --fail----> FAILED  (a transition still in flight when the
//                                  last rank finished could not commit)
// A failed job stays failed.
std::optional<JobPhase> NextJobPhase(JobPhase phase, JobEvent event);

// Thread-compatible: the membership calls it under its lock.
class JobState {
 public:
  JobPhase phase() const { return phase_; }
  bool running() const { return phase_ == JobPhase::kRunning; }
  bool finished() const { return phase_ == JobPhase::kFinished; }
  bool failed() const { return phase_ == JobPhase::kFailed; }
  // Why the job failed; empty unless failed().
  const std::string& failure_reason() const { return failure_reason_; }

  // Takes `event` when the table allows it from the current phase; false
  // (and nothing changes) when it refuses. `why` is the failure's reason.
  bool Finish();
  bool Fail(std::string why);

  // The phase stored before a restart (the store keeps two flags), and the
  // failure's reason as recorded then.
  void Restore(bool finished, bool failed, std::string failure_reason);

 private:
  bool Take(JobEvent event);

  JobPhase phase_ = JobPhase::kRunning;
  std::string failure_reason_;
};

}  // namespace zshard::server
