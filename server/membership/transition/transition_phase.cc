// The transition's table of allowed steps.
#include "server/membership/transition/transition_phase.h"

namespace zshard::server {
namespace {

struct Step {
  TransitionPhase from;
  TransitionEvent event;
  TransitionPhase to;
};

constexpr Step kSteps[] = {
    {TransitionPhase::kStable, TransitionEvent::kPropose,
     TransitionPhase::kProposed},
    {TransitionPhase::kProposed, TransitionEvent::kAbandon,
     TransitionPhase::kStable},
    {TransitionPhase::kProposed, TransitionEvent::kCommit,
     TransitionPhase::kCommitted},
    {TransitionPhase::kCommitted, TransitionEvent::kStable,
     TransitionPhase::kStable},
    {TransitionPhase::kCommitted, TransitionEvent::kPropose,
     TransitionPhase::kReproposed},
    {TransitionPhase::kReproposed, TransitionEvent::kAbandon,
     TransitionPhase::kCommitted},
    {TransitionPhase::kReproposed, TransitionEvent::kCommit,
     TransitionPhase::kCommitted},
    {TransitionPhase::kReproposed, TransitionEvent::kStable,
     TransitionPhase::kProposed},
};

}  // namespace

const char* TransitionPhaseName(TransitionPhase phase) {
  switch (phase) {
    case TransitionPhase::kStable:
      return "STABLE";
    case TransitionPhase::kProposed:
      return "PROPOSED";
    case TransitionPhase::kCommitted:
      return "COMMITTED";
    case TransitionPhase::kReproposed:
      return "REPROPOSED";
  }
  return "STABLE";
}

const char* TransitionEventName(TransitionEvent event) {
  switch (event) {
    case TransitionEvent::kPropose:
      return "propose";
    case TransitionEvent::kAbandon:
      return "abandon";
    case TransitionEvent::kCommit:
      return "commit";
    case TransitionEvent::kStable:
      return "stable";
  }
  return "propose";
}

std::optional<TransitionPhase> NextPhase(TransitionPhase phase,
                                         TransitionEvent event) {
  for (const Step& s : kSteps) {
    if (s.from == phase && s.event == event) return s.to;
  }
  return std::nullopt;
}

}  // namespace zshard::server
