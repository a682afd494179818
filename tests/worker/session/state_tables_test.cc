// Tests of the worker's life-cycle tables: every allowed and every refused
// transition of TrainRunner's activity and stepping and of the
// transition handler's epoch phase, and what Advance does with each.

#include <set>
#include <utility>

#include "client/worker/runner/state_table.h"
#include "client/worker/session/transition_handler.h"
#include "client/worker/train/train_states.h"
#include "gtest/gtest.h"

namespace zshard::worker {
namespace {

// Checks `table` against exactly the `allowed` changes among `states`
// (staying is always allowed).
template <typename State>
void ExpectTable(const StateTable<State>& table, const std::set<State>& states,
                 const std::set<std::pair<State, State>>& allowed) {
  for (State from : states) {
    for (State to : states) {
      const bool want = from == to || allowed.count({from, to}) > 0;
      EXPECT_EQ(table.Allows(from, to), want)
          << table.Name(from) << " -> " << table.Name(to);
    }
  }
}

TEST(StateTablesTest, TrainActivity) {
  using A = TrainActivity;
  ExpectTable<A>(
      TrainActivityTable(),
      {A::kIdle, A::kStepping, A::kPreparing, A::kCancelling, A::kShutdown},
      {
          {A::kIdle, A::kStepping},
          {A::kIdle, A::kPreparing},
          {A::kStepping, A::kIdle},
          {A::kPreparing, A::kIdle},
          {A::kCancelling, A::kIdle},
          {A::kPreparing, A::kCancelling},
          {A::kIdle, A::kShutdown},
          {A::kStepping, A::kShutdown},
          {A::kPreparing, A::kShutdown},
          {A::kCancelling, A::kShutdown},
      });
  // Refused, among others: a step during a preparation, a cancelled
  // preparation resumed, anything after the shutdown.
  EXPECT_FALSE(TrainActivityTable().Allows(A::kPreparing, A::kStepping));
  EXPECT_FALSE(TrainActivityTable().Allows(A::kCancelling, A::kPreparing));
  EXPECT_FALSE(TrainActivityTable().Allows(A::kShutdown, A::kIdle));
}

TEST(StateTablesTest, TrainStepping) {
  using S = TrainStepping;
  ExpectTable<S>(
      TrainSteppingTable(),
      {S::kInactive, S::kActive, S::kStopping, S::kPausing, S::kDone},
      {
          {S::kInactive, S::kActive},
          {S::kStopping, S::kActive},
          {S::kPausing, S::kActive},
          {S::kPausing, S::kStopping},
          {S::kActive, S::kStopping},
          {S::kInactive, S::kPausing},
          {S::kActive, S::kInactive},
          {S::kStopping, S::kPausing},
          {S::kStopping, S::kInactive},
          {S::kPausing, S::kInactive},
          {S::kActive, S::kDone},
          {S::kStopping, S::kDone},
          {S::kInactive, S::kDone},
          {S::kPausing, S::kDone},
      });
  // Done is final.
  EXPECT_FALSE(TrainSteppingTable().Allows(S::kDone, S::kActive));
  EXPECT_FALSE(TrainSteppingTable().Allows(S::kDone, S::kInactive));
}

TEST(StateTablesTest, EpochPhase) {
  using P = EpochPhase;
  ExpectTable<P>(EpochPhaseTable(),
                 {P::kPreparing, P::kReady, P::kStableUnready, P::kStable},
                 {
                     {P::kPreparing, P::kReady},
                     {P::kStableUnready, P::kStable},
                     {P::kReady, P::kStable},
                     {P::kPreparing, P::kStableUnready},
                     {P::kReady, P::kPreparing},
                     {P::kStableUnready, P::kPreparing},
                     {P::kStable, P::kPreparing},
                     {P::kPreparing, P::kStable},
                 });
  // An epoch never goes back from stable to merely ready.
  EXPECT_FALSE(EpochPhaseTable().Allows(P::kStable, P::kReady));
  EXPECT_FALSE(EpochPhaseTable().Allows(P::kReady, P::kStableUnready));
}

TEST(StateTablesTest, AdvanceFollowsTheTable) {
  TrainStepping state = TrainStepping::kInactive;
  TrainSteppingTable().Advance(state, TrainStepping::kActive);
  EXPECT_EQ(state, TrainStepping::kActive);
  TrainSteppingTable().Advance(state, TrainStepping::kActive);
  EXPECT_EQ(state, TrainStepping::kActive);
}

TEST(StateTablesDeathTest, AdvanceAbortsOnARefusedTransition) {
  EXPECT_DEATH(
      {
        TrainStepping state = TrainStepping::kDone;
        TrainSteppingTable().Advance(state, TrainStepping::kActive);
      },
      "");
}

}  // namespace
}  // namespace zshard::worker
