// The job's table of allowed steps.
#include "server/membership/job_state.h"

#include <utility>

namespace zshard::server {
namespace {

struct Step {
  JobPhase from;
  JobEvent event;
  JobPhase to;
};

constexpr Step kSteps[] = {
    {JobPhase::kRunning, JobEvent::kFinish, JobPhase::kFinished},
    {JobPhase::kRunning, JobEvent::kFail, JobPhase::kFailed},
    {JobPhase::kFinished, JobEvent::kFail, JobPhase::kFailed},
};

}  // namespace

const char* JobPhaseName(JobPhase phase) {
  switch (phase) {
    case JobPhase::kRunning:
      return "RUNNING";
    case JobPhase::kFinished:
      return "FINISHED";
    case JobPhase::kFailed:
      return "FAILED";
  }
  return "RUNNING";
}

const char* JobEventName(JobEvent event) {
  switch (event) {
    case JobEvent::kFinish:
      return "finish";
    case JobEvent::kFail:
      return "fail";
  }
  return "finish";
}

std::optional<JobPhase> NextJobPhase(JobPhase phase, JobEvent event) {
  for (const Step& s : kSteps) {
    if (s.from == phase && s.event == event) return s.to;
  }
  return std::nullopt;
}

bool JobState::Take(JobEvent event) {
  std::optional<JobPhase> next = NextJobPhase(phase_, event);
  if (!next.has_value()) return false;
  phase_ = *next;
  return true;
}

bool JobState::Finish() { return Take(JobEvent::kFinish); }

bool JobState::Fail(std::string why) {
  if (!Take(JobEvent::kFail)) return false;
  failure_reason_ = std::move(why);
  return true;
}

void JobState::Restore(bool finished, bool failed, std::string failure_reason) {
  phase_ = failed     ? JobPhase::kFailed
           : finished ? JobPhase::kFinished
                      : JobPhase::kRunning;
  failure_reason_ = failed ? std::move(failure_reason) : std::string();
}

}  // namespace zshard::server
