// EpochTransition: the records behind each phase step, and refused steps.
#include "server/membership/transition/epoch_transition.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace zshard::server {
namespace {

EpochPlan Plan(int64_t epoch, std::vector<std::string> ranks) {
  EpochPlan p;
  p.epoch = epoch;
  p.world = static_cast<int>(ranks.size());
  for (int r = 0; r < p.world; ++r) {
    Slot s;
    s.worker_id = ranks[r];
    s.rank = r;
    p.slots.push_back(s);
  }
  return p;
}

bool AllLive(const std::string&) { return true; }

TEST(EpochTransitionTest, ProposeCommitStable) {
  EpochTransition t;
  EXPECT_EQ(t.phase(), TransitionPhase::kStable);
  EXPECT_TRUE(t.committed_stable());
  EXPECT_EQ(t.pending_epoch(), 0);
  ASSERT_TRUE(t.Propose(Plan(1, {"a", "b"})).ok());
  EXPECT_EQ(t.phase(), TransitionPhase::kProposed);
  EXPECT_EQ(t.next_epoch(), 2);
  EXPECT_EQ(t.pending_epoch(), 1);
  EXPECT_TRUE(t.CheckEpoch(1).ok());
  EXPECT_FALSE(t.AckPrepared("a", PreparedAck{}, AllLive));
  PreparedAck at7;
  at7.step = 7;
  at7.adam_step = 7;
  EXPECT_TRUE(t.AckPrepared("b", at7, AllLive));
  absl::StatusOr<EpochPlan> p = t.ResolveCommit(true);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->resume_step, 7);  // no holders yet: the highest step
  ASSERT_TRUE(t.Commit(*p).ok());
  EXPECT_EQ(t.phase(), TransitionPhase::kCommitted);
  EXPECT_FALSE(t.committed_stable());
  EXPECT_EQ(t.proposal(), nullptr);
  EXPECT_EQ(t.pending_epoch(), 1);
  EXPECT_FALSE(t.AckActive("a"));
  EXPECT_TRUE(t.AckActive("b"));
  ASSERT_TRUE(t.MarkStable(5).ok());
  EXPECT_EQ(t.phase(), TransitionPhase::kStable);
  EXPECT_EQ(t.stable().epoch, 1);
  EXPECT_EQ(t.stable().duration_ms, 5);
  EXPECT_FALSE(t.CheckEpoch(2).ok());
}

TEST(EpochTransitionTest, AbandonKeepsTheLastAbandonedUntilTheNextProposal) {
  EpochTransition t;
  ASSERT_TRUE(t.Propose(Plan(1, {"a"})).ok());
  absl::StatusOr<EpochPlan> a = t.Abandon("member a left");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->reason, "member a left");
  EXPECT_EQ(t.phase(), TransitionPhase::kStable);
  ASSERT_NE(t.abandoned(), nullptr);
  EXPECT_EQ(t.abandoned()->epoch, 1);
  ASSERT_TRUE(t.Propose(Plan(2, {"b"})).ok());
  EXPECT_EQ(t.abandoned(), nullptr);
}

TEST(EpochTransitionTest, PreparedWaitsForLiveRanksOfTheStableEpoch) {
  EpochTransition t;
  t.Restore(Plan(3, {"a", "b"}), true, Plan(3, {"a", "b"}), 4);
  ASSERT_TRUE(t.Propose(Plan(4, {"a", "c"})).ok());
  auto b_dead = [](const std::string& id) { return id != "b"; };
  auto all_live = [](const std::string&) { return true; };
  EXPECT_FALSE(t.AckPrepared("a", PreparedAck{}, all_live));
  EXPECT_FALSE(t.AckPrepared("c", PreparedAck{}, all_live));  // b: a sender
  EXPECT_TRUE(t.AckPrepared("c", PreparedAck{}, b_dead));
}

TEST(EpochTransitionTest, RefusedStepsChangeNothing) {
  EpochTransition t;
  EXPECT_EQ(t.Commit(Plan(1, {"a"})).code(), absl::StatusCode::kInternal);
  EXPECT_EQ(t.MarkStable(0).code(), absl::StatusCode::kInternal);
  EXPECT_EQ(t.Abandon("x").status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(t.Propose(Plan(7, {"a"})).code(), absl::StatusCode::kInternal);
  EXPECT_EQ(t.phase(), TransitionPhase::kStable);
  EXPECT_EQ(t.committed().epoch, 0);
  EXPECT_EQ(t.next_epoch(), 1);
}

TEST(EpochTransitionTest, ABrokenCommittedEpochIsReproposedAndSuperseded) {
  EpochTransition t;
  EpochPlan c = Plan(2, {"a", "b"});
  plan::Move mv;
  mv.source_member = "s";
  c.moves.push_back(mv);
  t.Restore(c, false, Plan(1, {"a"}), 3);
  EXPECT_EQ(t.phase(), TransitionPhase::kCommitted);
  EXPECT_EQ(t.committed_senders().count("s"), 1u);
  ASSERT_TRUE(t.Propose(Plan(3, {"a"})).ok());
  EXPECT_EQ(t.phase(), TransitionPhase::kReproposed);
  EXPECT_FALSE(t.committed_stable());
  EXPECT_EQ(t.pending_epoch(), 3);
  ASSERT_TRUE(t.Abandon("again").ok());
  EXPECT_EQ(t.phase(), TransitionPhase::kCommitted);
  ASSERT_TRUE(t.Propose(Plan(4, {"a"})).ok());
  ASSERT_TRUE(t.AckPrepared("a", PreparedAck{}, AllLive));
  ASSERT_TRUE(t.Commit(*t.ResolveCommit(true)).ok());
  EXPECT_EQ(t.phase(), TransitionPhase::kCommitted);
  EXPECT_EQ(t.committed().epoch, 4);
  EXPECT_TRUE(t.committed_senders().empty());
}

}  // namespace
}  // namespace zshard::server
