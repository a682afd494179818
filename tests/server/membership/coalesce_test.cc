// Coalesced transitions with the fake clock: a storm of joins settles into
// one proposal, continuous churn is proposed after at most ten settle
// windows (a hundred while the job forms), and a change that alters the world
// of a proposal in flight supersedes it instead of queueing behind it.
#include <string>

#include "gtest/gtest.h"
#include "tests/server/membership/membership_harness.h"

namespace zshard::server {
namespace {

using testing::Harness;

// keep_i: the world grows by I = 2 with each pair of joiners.
job::JobSpec SettleJob(int64_t settle_ms, int max_world) {
  job::JobSpec spec = testing::TestJob(2, 2, max_world);
  spec.world.resize = job::ResizePolicy::kKeepI;
  spec.transition_settle_ms = settle_ms;
  return spec;
}

int Proposed(const std::vector<PlanUpdate>& updates) {
  int n = 0;
  for (const PlanUpdate& u : updates) n += u.phase == PlanPhase::kProposed;
  return n;
}

TEST(CoalesceTest, AStormOfJoinsGivesOneProposal) {
  Harness h(SettleJob(300, 128));
  h.Updates();
  // 100 joins, 10 ms apart, the ticker running between them.
  for (int i = 0; i < 100; ++i) {
    h.Join("w" + std::to_string(i));
    h.clock_.AdvanceMs(10);
    h.m_->Tick();
  }
  EXPECT_EQ(h.m_->Stats().proposals, 0);
  h.clock_.AdvanceMs(289);  // 299 ms after the last join: still settling
  h.m_->Tick();
  EXPECT_EQ(h.m_->Stats().proposals, 0);
  h.clock_.AdvanceMs(1);
  h.m_->Tick();
  MembershipStats s = h.m_->Stats();
  EXPECT_EQ(s.proposals, 1);
  EXPECT_EQ(s.superseded, 0);
  std::vector<PlanUpdate> u = h.Updates();
  ASSERT_EQ(Proposed(u), 1);
  EXPECT_EQ(u.back().plan.world, 100);
  EXPECT_EQ(u.back().plan.reason,
            "member w99 joined (with 99 more changes gathered into this "
            "proposal)");
  h.proposed_ = u.back().plan;
  EpochPlan p = h.Settle();
  EXPECT_EQ(p.epoch, 1);
  EXPECT_EQ(p.world, 100);
  EXPECT_EQ(h.m_->Stats().proposals, 1);
}

TEST(CoalesceTest, ContinuousChurnIsProposedAfterTenWindows) {
  Harness h(SettleJob(100, 128));
  h.Join("a");
  h.Join("b");
  h.clock_.AdvanceMs(100);
  h.m_->Tick();
  ASSERT_EQ(h.Settle().epoch, 1);
  ASSERT_EQ(h.m_->Stats().proposals, 1);
  // Epoch 1 trains; a join every 50 ms never leaves 100 ms of quiet.
  int i = 0;
  for (; h.m_->Stats().proposals == 1 && i < 100; ++i) {
    h.Join("w" + std::to_string(i));
    h.clock_.AdvanceMs(50);
    h.m_->Tick();
  }
  // The window opened at the first join; 10 windows = 1000 ms = 20 joins.
  EXPECT_EQ(i, 20);
  EXPECT_EQ(h.m_->Stats().proposals, 2);
}

TEST(CoalesceTest, AFormingJobWaitsUpToAHundredWindows) {
  job::JobSpec spec = SettleJob(100, 1024);
  spec.lease_timeout_ms = 60000;  // no member expires in these 10 s
  Harness h(spec);
  // Before the first epoch nothing trains: joins 50 ms apart for 5 s
  // (50 windows) are one storm, proposed once they pause.
  for (int i = 0; i < 100; ++i) {
    h.Join("w" + std::to_string(i));
    h.clock_.AdvanceMs(50);
    h.m_->Tick();
  }
  EXPECT_EQ(h.m_->Stats().proposals, 0);
  h.clock_.AdvanceMs(50);
  h.m_->Tick();
  EXPECT_EQ(h.m_->Stats().proposals, 1);
  EXPECT_EQ(h.m_->Stats().superseded, 0);
  EXPECT_EQ(h.Settle().world, 100);
  // Joins that never pause are still proposed: 100 windows = 10 s after
  // the first of them, whatever comes after.
  Harness churn(spec);
  int i = 0;
  for (; churn.m_->Stats().proposals == 0 && i < 1000; ++i) {
    churn.Join("w" + std::to_string(i));
    churn.clock_.AdvanceMs(50);
    churn.m_->Tick();
  }
  EXPECT_EQ(i, 200);
  EXPECT_EQ(churn.m_->Stats().proposals, 1);
}

TEST(CoalesceTest, AChangeOfWorldSupersedesTheProposalInFlight) {
  Harness h(SettleJob(100, 6));
  h.Join("a");
  h.Join("b");
  h.clock_.AdvanceMs(100);
  h.m_->Tick();
  std::vector<PlanUpdate> u = h.Updates();
  ASSERT_EQ(Proposed(u), 1);
  EXPECT_EQ(u.back().plan.world, 2);
  const int64_t first = u.back().plan.epoch;
  // Two more join while epoch `first` waits for its acks: world 4.
  h.Join("c");
  h.Join("d");
  h.clock_.AdvanceMs(100);
  h.m_->Tick();
  // Watchers get the new proposal alone: an ABANDONED before it would let
  // the workers that see it resume while those that get only the latest
  // state stay paused. The abandonment is still recorded.
  u = h.Updates();
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(u[0].phase, PlanPhase::kProposed);
  EXPECT_EQ(u[0].plan.world, 4);
  EXPECT_GT(u[0].plan.epoch, first);
  MembershipStats s = h.m_->Stats();
  EXPECT_EQ(s.proposals, 2);
  EXPECT_EQ(s.abandons, 1);
  EXPECT_EQ(s.superseded, 1);
  // A join that leaves the world as it is waits for the proposal instead.
  h.Join("e");
  h.clock_.AdvanceMs(100);
  h.m_->Tick();
  EXPECT_TRUE(h.Updates().empty());
  h.proposed_ = u[0].plan;
  EpochPlan p = h.Settle();
  EXPECT_EQ(p.world, 4);
  EXPECT_EQ(h.m_->Stats().superseded, 1);
  EXPECT_EQ(h.StateOf("e"), MemberState::kSpare);
}

TEST(CoalesceTest, SettleZeroProposesAtEachChange) {
  Harness h(SettleJob(0, 4));
  h.Join("a");
  h.Join("b");
  EXPECT_EQ(h.m_->Stats().proposals, 1);
}

}  // namespace
}  // namespace zshard::server
