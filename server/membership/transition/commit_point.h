// The resume point of a transition (protocol point 2 of live re-sharding):
// from the PREPARED acks of the members that hold optimizer state, the step
// every rank resumes from, its Adam step, and whether ranks that failed
// inside the last commit all-reduce finish that step first. Pure.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace zshard::server {

// One PREPARED ack (see zshard.v1.AckTransitionRequest).
struct PreparedAck {
  int64_t step = 0;       // last finished step
  int64_t adam_step = 0;  // Adam updates applied by `step`
  bool commit_point_passed = false;
  // Failed inside the commit all-reduce of step + 1 after contributing.
  bool commit_pending = false;
  // The commit all-reduce result of `step`; empty when unknown.
  std::vector<double> commit_values;
};

struct CommitPoint {
  int64_t resume_step = 0;
  int64_t resume_adam_step = 0;
  bool finish_pending_step = false;
  std::vector<double> commit_values;
};

// `holders`: acks of members holding state (ranks of the base epoch);
// `others`: the rest (newcomers, spares), used only when no one holds
// state. Let S be the holders' highest step: every holder must be at S, or
// at S - 1 with commit_pending, in which case a holder at S must report
// commit values (they finish step S with them). FailedPrecondition naming
// the conflict otherwise (state of two steps is never mixed), and when the
// holders at S disagree on the Adam step.
absl::StatusOr<CommitPoint> ResolveCommitPoint(
    const std::vector<PreparedAck>& holders,
    const std::vector<PreparedAck>& others);

}  // namespace zshard::server
