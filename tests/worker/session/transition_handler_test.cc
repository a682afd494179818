// Tests of the worker's side of the two-phase transition: acks, resume
// steps, spares, replays and abandoned proposals.

#include "client/worker/session/transition_handler.h"

#include "client/worker/runner/idle_runner.h"
#include "gtest/gtest.h"

namespace zshard::worker {
namespace {

v1::PlanUpdate Update(int64_t epoch, v1::PlanPhase phase,
                      std::vector<std::pair<std::string, int>> members,
                      int64_t resume_step = 0) {
  v1::PlanUpdate update;
  update.set_epoch(epoch);
  update.set_phase(phase);
  update.set_resume_step(resume_step);
  for (const auto& [id, rank] : members) {
    v1::Assignment* a = update.add_assignments();
    a->set_worker_id(id);
    a->set_rank(rank);
  }
  return update;
}

class TransitionHandlerTest : public ::testing::Test {
 protected:
  // A long delay: the step moves only when the test sets it.
  IdleRunner runner_{{/*step_delay_ms=*/600000, /*steps=*/0}};
  TransitionHandler handler_{"w1", &runner_};
};

TEST_F(TransitionHandlerTest, ProposeCommitActivates) {
  auto ack = handler_.Apply(
      Update(1, v1::PLAN_PHASE_PROPOSED, {{"w0", 0}, {"w1", 1}}));
  ASSERT_TRUE(ack.has_value());
  EXPECT_EQ(ack->epoch, 1);
  EXPECT_EQ(ack->phase, v1::ACK_PHASE_PREPARED);
  EXPECT_EQ(ack->step, 0);
  EXPECT_FALSE(runner_.active());

  ack = handler_.Apply(
      Update(1, v1::PLAN_PHASE_COMMITTED, {{"w0", 0}, {"w1", 1}}, 7));
  ASSERT_TRUE(ack.has_value());
  EXPECT_EQ(ack->phase, v1::ACK_PHASE_ACTIVE);
  EXPECT_EQ(ack->step, 7);
  EXPECT_TRUE(runner_.active());
  EXPECT_EQ(handler_.epoch(), 1);
  EXPECT_EQ(handler_.rank(), 1);
}

TEST_F(TransitionHandlerTest, SpareAcksButDoesNotStep) {
  ASSERT_TRUE(handler_.Apply(
      Update(1, v1::PLAN_PHASE_PROPOSED, {{"w0", 0}, {"w1", -1}})));
  auto ack = handler_.Apply(
      Update(1, v1::PLAN_PHASE_COMMITTED, {{"w0", 0}, {"w1", -1}}, 3));
  ASSERT_TRUE(ack.has_value());
  EXPECT_EQ(ack->phase, v1::ACK_PHASE_ACTIVE);
  EXPECT_FALSE(runner_.active());
  EXPECT_EQ(handler_.rank(), -1);
}

TEST_F(TransitionHandlerTest, ReplayOfCommittedEpochKeepsOwnStep) {
  handler_.Apply(Update(2, v1::PLAN_PHASE_COMMITTED, {{"w1", 0}}, 5));
  runner_.Activate(40);  // Stepped on while the coordinator was away.
  auto ack =
      handler_.Apply(Update(2, v1::PLAN_PHASE_COMMITTED, {{"w1", 0}}, 5));
  ASSERT_TRUE(ack.has_value());
  EXPECT_EQ(ack->step, 40);
  EXPECT_EQ(runner_.step(), 40);
  EXPECT_TRUE(runner_.active());
}

TEST_F(TransitionHandlerTest, AbandonedProposalResumes) {
  handler_.Apply(Update(1, v1::PLAN_PHASE_COMMITTED, {{"w1", 0}}, 0));
  runner_.Activate(9);
  ASSERT_TRUE(handler_.Apply(
      Update(2, v1::PLAN_PHASE_PROPOSED, {{"w1", 0}, {"w2", 1}})));
  EXPECT_FALSE(runner_.active());
  EXPECT_FALSE(handler_.Apply(Update(2, v1::PLAN_PHASE_ABANDONED, {})));
  EXPECT_TRUE(runner_.active());
  EXPECT_EQ(runner_.step(), 9);
  EXPECT_EQ(handler_.epoch(), 1);
}

TEST_F(TransitionHandlerTest, AnAbandonmentOlderThanTheProposalKeepsItPaused) {
  handler_.Apply(Update(1, v1::PLAN_PHASE_COMMITTED, {{"w1", 0}}, 0));
  runner_.Activate(9);
  // Epoch 2 superseded by epoch 3: the coordinator sends only the
  // proposal, and a replayed ABANDONED of epoch 2 must not resume.
  ASSERT_TRUE(handler_.Apply(
      Update(2, v1::PLAN_PHASE_PROPOSED, {{"w1", 0}, {"w2", 1}})));
  auto ack = handler_.Apply(
      Update(3, v1::PLAN_PHASE_PROPOSED, {{"w1", 0}, {"w2", 1}, {"w3", 2}}));
  ASSERT_TRUE(ack.has_value());
  EXPECT_EQ(ack->epoch, 3);
  EXPECT_EQ(ack->step, 9);
  EXPECT_FALSE(handler_.Apply(Update(2, v1::PLAN_PHASE_ABANDONED, {})));
  EXPECT_FALSE(runner_.active());
  EXPECT_FALSE(handler_.Apply(Update(3, v1::PLAN_PHASE_ABANDONED, {})));
  EXPECT_TRUE(runner_.active());
  EXPECT_EQ(runner_.step(), 9);
}

TEST_F(TransitionHandlerTest, StaleAndForeignUpdatesGetNoAck) {
  handler_.Apply(Update(3, v1::PLAN_PHASE_COMMITTED, {{"w1", 0}}, 0));
  EXPECT_FALSE(handler_.Apply(Update(2, v1::PLAN_PHASE_PROPOSED, {{"w1", 0}})));
  EXPECT_FALSE(
      handler_.Apply(Update(2, v1::PLAN_PHASE_COMMITTED, {{"w1", 0}})));
  EXPECT_EQ(handler_.epoch(), 3);
  // An epoch without this worker: it stops and acks nothing.
  EXPECT_FALSE(handler_.Apply(Update(4, v1::PLAN_PHASE_PROPOSED, {{"w9", 0}})));
  EXPECT_FALSE(runner_.active());
}

}  // namespace
}  // namespace zshard::worker
