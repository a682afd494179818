// Tests of the worker's life-cycle tables: every allowed and every refused
// transition of TrainRunner's activity and stepping, of the transition
// handler's epoch phase and of the coordinator session's state, leave and
// stop, and what Advance does with each.

#include <set>
#include <utility>

#include "client/worker/runner/state_table.h"
#include "client/worker/session/coordinator_session.h"
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

TEST(StateTablesTest, SessionState) {
  using S = SessionState;
  ExpectTable<S>(SessionStateTable(),
                 {S::kNotJoined, S::kMember, S::kDraining, S::kEnded},
                 {
                     {S::kNotJoined, S::kMember},
                     {S::kMember, S::kDraining},
                     {S::kDraining, S::kMember},
                     {S::kMember, S::kEnded},
                     {S::kDraining, S::kEnded},
                     {S::kEnded, S::kMember},
                 });
  // Only a join leaves "not joined"; an ended session drains no more and
  // is never "not joined" again.
  EXPECT_FALSE(SessionStateTable().Allows(S::kNotJoined, S::kEnded));
  EXPECT_FALSE(SessionStateTable().Allows(S::kEnded, S::kDraining));
  EXPECT_FALSE(SessionStateTable().Allows(S::kEnded, S::kNotJoined));
}

TEST(StateTablesTest, SessionLeave) {
  using L = LeaveState;
  ExpectTable<L>(LeaveStateTable(), {L::kStaying, L::kLeaving, L::kLeft},
                 {
                     {L::kStaying, L::kLeaving},
                     {L::kLeaving, L::kStaying},
                     {L::kLeaving, L::kLeft},
                 });
  // Left is final; only a Leave call leads there.
  EXPECT_FALSE(LeaveStateTable().Allows(L::kLeft, L::kStaying));
  EXPECT_FALSE(LeaveStateTable().Allows(L::kLeft, L::kLeaving));
  EXPECT_FALSE(LeaveStateTable().Allows(L::kStaying, L::kLeft));
}

TEST(StateTablesTest, SessionStop) {
  using R = StopRequest;
  ExpectTable<R>(StopRequestTable(), {R::kNone, R::kRequested, R::kHandled},
                 {
                     {R::kNone, R::kRequested},
                     {R::kRequested, R::kHandled},
                 });
  // A Stop() is never forgotten, nor handled before it was asked.
  EXPECT_FALSE(StopRequestTable().Allows(R::kHandled, R::kRequested));
  EXPECT_FALSE(StopRequestTable().Allows(R::kRequested, R::kNone));
  EXPECT_FALSE(StopRequestTable().Allows(R::kNone, R::kHandled));
}

TEST(StateTablesTest, SessionStateNames) {
  EXPECT_STREQ(SessionStateTable().Name(SessionState::kDraining), "draining");
  EXPECT_STREQ(LeaveStateTable().Name(LeaveState::kLeft), "left");
  EXPECT_STREQ(StopRequestTable().Name(StopRequest::kHandled), "handled");
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
  EXPECT_DEATH(
      {
        LeaveState state = LeaveState::kLeft;
        LeaveStateTable().Advance(state, LeaveState::kStaying);
      },
      "");
}

}  // namespace
}  // namespace zshard::worker
