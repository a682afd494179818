// Names of the membership enums.
#include "server/state/types.h"

namespace zshard::server {

const char* MemberStateName(MemberState state) {
  switch (state) {
    case MemberState::kJoining:
      return "JOINING";
    case MemberState::kActive:
      return "ACTIVE";
    case MemberState::kSpare:
      return "SPARE";
    case MemberState::kDraining:
      return "DRAINING";
    case MemberState::kDead:
      return "DEAD";
    case MemberState::kLeft:
      return "LEFT";
  }
  return "DEAD";
}

int RankIn(const EpochPlan& plan, const std::string& worker_id) {
  for (int r = 0; r < plan.world && r < static_cast<int>(plan.slots.size());
       ++r) {
    if (plan.slots[r].worker_id == worker_id) return r;
  }
  return -1;
}

}  // namespace zshard::server
