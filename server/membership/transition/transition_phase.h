// The life cycle of the coordinator's epoch transition (docs/design.md section
// 6) as one phase enum and one table of allowed steps between phases.
#pragma once

#include <optional>

namespace zshard::server {

// Where the transition stands. The committed epoch is stable in kStable
// and kProposed; epoch 0 (none committed yet) counts as stable.
enum class TransitionPhase {
  // Nothing in flight: the committed epoch (if any) is stable.
  kStable,
  // A proposal over the stable epoch collects PREPARED acks.
  kProposed,
  // The committed epoch's moves run; it collects ACTIVE acks.
  kCommitted,
  // A proposal collects PREPARED acks while the committed epoch, which
  // broke before it was stable, is still not stable.
  kReproposed,
};

// What happens to the transition.
enum class TransitionEvent {
  kPropose,  // a new epoch is proposed
  kAbandon,  // the proposal is given up
  kCommit,   // every participant acked PREPARED: the proposal commits
  kStable,   // every rank of the committed epoch acked ACTIVE
};

// "STABLE", "PROPOSED", "COMMITTED", "REPROPOSED".
const char* TransitionPhaseName(TransitionPhase phase);
// "propose", "abandon", "commit", "stable".
const char* TransitionEventName(TransitionEvent event);

// The phase after `event` in `phase`, or nullopt when the table refuses
// the step. Allowed:
//   STABLE     --propose--> PROPOSED
//   PROPOSED   --abandon--> STABLE
//   PROPOSED   --commit---> COMMITTED
//   COMMITTED  --stable---> STABLE
//   COMMITTED  --propose--> REPROPOSED  (the committed epoch broke)
//   REPROPOSED --abandon--> COMMITTED
//   REPROPOSED --commit---> COMMITTED   (the broken epoch is superseded)
//   REPROPOSED --stable---> PROPOSED    (its ranks acked ACTIVE after all)
std::optional<TransitionPhase> NextPhase(TransitionPhase phase,
                                         TransitionEvent event);

}  // namespace zshard::server
