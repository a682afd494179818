// TransitionPhase: the table of allowed and refused steps.
#include "server/membership/transition/transition_phase.h"

#include <map>
#include <utility>

#include "gtest/gtest.h"

namespace zshard::server {
namespace {

using P = TransitionPhase;
using E = TransitionEvent;

const P kPhases[] = {P::kStable, P::kProposed, P::kCommitted, P::kReproposed};
const E kEvents[] = {E::kPropose, E::kAbandon, E::kCommit, E::kStable};

// Every allowed step; the rest of the table is refused.
const std::map<std::pair<P, E>, P>& Allowed() {
  static const auto* allowed = new std::map<std::pair<P, E>, P>{
      {{P::kStable, E::kPropose}, P::kProposed},
      {{P::kProposed, E::kAbandon}, P::kStable},
      {{P::kProposed, E::kCommit}, P::kCommitted},
      {{P::kCommitted, E::kStable}, P::kStable},
      {{P::kCommitted, E::kPropose}, P::kReproposed},
      {{P::kReproposed, E::kAbandon}, P::kCommitted},
      {{P::kReproposed, E::kCommit}, P::kCommitted},
      {{P::kReproposed, E::kStable}, P::kProposed},
  };
  return *allowed;
}

TEST(TransitionPhaseTest, AllowedStepsLeadWhereTheTableSays) {
  for (const auto& [from, to] : Allowed()) {
    std::optional<P> next = NextPhase(from.first, from.second);
    ASSERT_TRUE(next.has_value()) << TransitionPhaseName(from.first) << " "
                                  << TransitionEventName(from.second);
    EXPECT_EQ(*next, to) << TransitionPhaseName(from.first) << " "
                         << TransitionEventName(from.second);
  }
}

TEST(TransitionPhaseTest, EveryOtherStepIsRefused) {
  int refused = 0;
  for (P phase : kPhases) {
    for (E event : kEvents) {
      if (Allowed().count({phase, event}) > 0) continue;
      EXPECT_FALSE(NextPhase(phase, event).has_value())
          << TransitionPhaseName(phase) << " " << TransitionEventName(event);
      ++refused;
    }
  }
  EXPECT_EQ(refused, 8);
}

TEST(TransitionPhaseTest, ARoundTripReturnsToStable) {
  P p = P::kStable;
  for (E e : {E::kPropose, E::kCommit, E::kStable}) p = *NextPhase(p, e);
  EXPECT_EQ(p, P::kStable);
  // A committed epoch that broke: re-proposed, committed over it, stable.
  p = *NextPhase(P::kCommitted, E::kPropose);
  EXPECT_EQ(p, P::kReproposed);
  EXPECT_EQ(*NextPhase(p, E::kAbandon), P::kCommitted);
  EXPECT_EQ(*NextPhase(*NextPhase(p, E::kCommit), E::kStable), P::kStable);
}

TEST(TransitionPhaseTest, NamesAreDistinct) {
  EXPECT_STREQ(TransitionPhaseName(P::kStable), "STABLE");
  EXPECT_STREQ(TransitionPhaseName(P::kProposed), "PROPOSED");
  EXPECT_STREQ(TransitionPhaseName(P::kCommitted), "COMMITTED");
  EXPECT_STREQ(TransitionPhaseName(P::kReproposed), "REPROPOSED");
  EXPECT_STREQ(TransitionEventName(E::kStable), "stable");
}

}  // namespace
}  // namespace zshard::server
