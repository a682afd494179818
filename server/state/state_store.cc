// Names of the stored epoch statuses.
#include "server/state/state_store.h"

namespace zshard::server {

const char* EpochStatusName(EpochStatus status) {
  switch (status) {
    case EpochStatus::kProposed:
      return "proposed";
    case EpochStatus::kCommitted:
      return "committed";
    case EpochStatus::kStable:
      return "stable";
    case EpochStatus::kAbandoned:
      return "abandoned";
    case EpochStatus::kBroken:
      return "broken";
  }
  return "abandoned";
}

}  // namespace zshard::server
