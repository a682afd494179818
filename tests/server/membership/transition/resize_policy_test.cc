// The world policy in the membership state machine (fake clock, the real
// planner): under keep_d a failed rank with no spare dissolves its instance
// and nothing moves, one joiner waits as a spare, and D spares form a whole
// instance that receives one replica's worth; keep_i on the same job
// changes D instead.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/membership/membership.h"
#include "tests/server/membership/membership_harness.h"

namespace zshard::server {
namespace {

using testing::Harness;

// One replica's optimizer state of TestJob's model: (1000 + 300 x 7)
// elements x 12 bytes (fp32 master, m and v).
constexpr int64_t kReplicaBytes = 12 * (1000 + 2100);

std::vector<EpochPlan> Proposed(const std::vector<PlanUpdate>& updates) {
  std::vector<EpochPlan> out;
  for (const PlanUpdate& u : updates) {
    if (u.phase == PlanPhase::kProposed) out.push_back(u.plan);
  }
  return out;
}

std::vector<std::string> RankNames(const EpochPlan& p) {
  std::vector<std::string> out;
  for (int r = 0; r < p.world; ++r) out.push_back(p.slots[r].name);
  return out;
}

// Four members in two instances of D = 2, stable with state at step 5.
EpochPlan StartFour(Harness& h) {
  for (int i = 0; i < 4; ++i) h.Join("w" + std::to_string(i));
  EpochPlan p = h.Settle(5);
  h.Updates();
  return p;
}

TEST(ResizePolicyTest, KeepDIsTheDefaultForTwoInstances) {
  Harness h;  // I = 2, world in [2, 4]
  EXPECT_EQ(h.spec_.world.resize, job::ResizePolicy::kKeepD);
  EpochPlan p = StartFour(h);
  EXPECT_EQ(p.world, 4);
  EXPECT_EQ(p.instances, 2);
  EXPECT_EQ(RankNames(p), (std::vector<std::string>{"w0", "w1", "w2", "w3"}));
}

TEST(ResizePolicyTest, KeepDFailureWithoutSpareDropsAnInstanceMovingNothing) {
  Harness h;
  const EpochPlan stable = StartFour(h);
  h.Kill("w1");  // rank 1 of instance 0; no spare
  std::vector<EpochPlan> proposed = Proposed(h.Updates());
  ASSERT_EQ(proposed.size(), 1u);
  const EpochPlan& p = proposed[0];
  EXPECT_EQ(p.base_epoch, stable.epoch);
  EXPECT_EQ(p.world, 2);
  EXPECT_EQ(p.instances, 1);  // I' = I - 1, D stays 2
  // Instance 1 stays whole (renumbered 0): shard ranks kept.
  EXPECT_EQ(RankNames(p), (std::vector<std::string>{"w2", "w3"}));
  EXPECT_EQ(p.slots[0].instance, 0);
  EXPECT_EQ(p.slots[0].shard_rank, 0);
  EXPECT_EQ(p.slots[1].shard_rank, 1);
  EXPECT_TRUE(p.moves.empty());
  EXPECT_EQ(p.summary.bytes_moved, 0);
  EXPECT_EQ(p.summary.lower_bound_bytes, 0);
  EXPECT_FALSE(p.restore.active());
  EXPECT_EQ(p.spares, 1);
  h.proposed_ = p;
  const EpochPlan after = h.Settle(5);
  EXPECT_EQ(after.epoch, p.epoch);
  EXPECT_EQ(h.StateOf("w0"), MemberState::kSpare);  // the dissolved half
  EXPECT_EQ(h.m_->View().instances, 1);
}

TEST(ResizePolicyTest, KeepDOneJoinerWaitsAsASpare) {
  Harness h;
  const EpochPlan stable = StartFour(h);
  const int64_t proposals = h.m_->Stats().proposals;
  h.Join("w4");
  h.m_->Tick();
  EXPECT_TRUE(Proposed(h.Updates()).empty());
  EXPECT_EQ(h.m_->Stats().proposals, proposals);
  EXPECT_EQ(h.StateOf("w4"), MemberState::kSpare);
  EXPECT_EQ(h.m_->View().epoch, stable.epoch);
}

TEST(ResizePolicyTest, KeepDSpareTakesAFailedRankKeepingDAndI) {
  Harness h;
  for (int i = 0; i < 5; ++i) h.Join("w" + std::to_string(i));
  const EpochPlan stable = h.Settle(5);
  ASSERT_EQ(stable.world, 4);
  h.Updates();
  h.Kill("w1");
  std::vector<EpochPlan> proposed = Proposed(h.Updates());
  ASSERT_EQ(proposed.size(), 1u);
  const EpochPlan& p = proposed[0];
  EXPECT_EQ(p.world, 4);
  EXPECT_EQ(p.instances, 2);
  EXPECT_EQ(RankNames(p), (std::vector<std::string>{"w0", "w4", "w2", "w3"}));
  // The spare receives rank 1's shard: half a replica.
  EXPECT_EQ(p.summary.bytes_moved, p.summary.lower_bound_bytes);
  EXPECT_GT(p.summary.bytes_moved, 0);
  EXPECT_LT(p.summary.bytes_moved, kReplicaBytes);
}

TEST(ResizePolicyTest, KeepDSparesFormAWholeInstanceReceivingOneReplica) {
  Harness h;
  StartFour(h);
  h.Kill("w1");
  EXPECT_EQ(h.Settle(5).world, 2);  // {w2, w3}, w0 a spare
  EXPECT_EQ(h.StateOf("w0"), MemberState::kSpare);
  h.Updates();
  h.Join("w4");  // with w0: D = 2 spares, a whole instance
  std::vector<EpochPlan> proposed = Proposed(h.Updates());
  ASSERT_EQ(proposed.size(), 1u);
  const EpochPlan& p = proposed[0];
  EXPECT_EQ(p.world, 4);
  EXPECT_EQ(p.instances, 2);
  EXPECT_EQ(RankNames(p), (std::vector<std::string>{"w2", "w3", "w0", "w4"}));
  EXPECT_EQ(p.summary.bytes_moved, kReplicaBytes);
  EXPECT_EQ(p.summary.lower_bound_bytes, kReplicaBytes);
  for (const plan::Move& m : p.moves) {
    EXPECT_GE(m.dest_rank, 2);  // only the new instance receives
  }
}

TEST(ResizePolicyTest, KeepDWaitsForAWholeInstance) {
  Harness h(testing::TestJob(2, 2, 8));  // D = 4
  for (int i = 0; i < 3; ++i) h.Join("w" + std::to_string(i));
  EXPECT_TRUE(Proposed(h.Updates()).empty());
  std::string waiting;
  for (const Event& e : h.m_->events()->After(0, 100).events) {
    if (e.kind == "waiting") waiting = e.reason;
  }
  EXPECT_EQ(waiting,
            "3 healthy members, world needs 4 (no world: no multiple of D=4 "
            "within [min 2, min(healthy 3, max 8)] (keep_d))");
  h.Join("w3");
  std::vector<EpochPlan> proposed = Proposed(h.Updates());
  ASSERT_EQ(proposed.size(), 1u);
  EXPECT_EQ(proposed[0].world, 4);
  EXPECT_EQ(proposed[0].instances, 1);
}

TEST(ResizePolicyTest, KeepDTargetWorldIsWholeInstances) {
  Harness h;
  StartFour(h);
  auto bad = h.m_->SetTargetWorld(3);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(),
            "target world 3 must be 0 or a multiple of D=2 in [2, 4] (keep_d)");
  ASSERT_TRUE(h.m_->SetTargetWorld(2).ok());
  std::vector<EpochPlan> proposed = Proposed(h.Updates());
  ASSERT_EQ(proposed.size(), 1u);
  EXPECT_EQ(proposed[0].world, 2);
  EXPECT_EQ(proposed[0].instances, 1);
  EXPECT_EQ(RankNames(proposed[0]), (std::vector<std::string>{"w0", "w1"}));
  EXPECT_EQ(proposed[0].summary.bytes_moved, 0);
}

TEST(ResizePolicyTest, KeepIFailureWithoutSpareChangesDAndMoves) {
  job::JobSpec spec = testing::TestJob();
  spec.world.resize = job::ResizePolicy::kKeepI;
  Harness h(spec);
  const EpochPlan stable = StartFour(h);
  ASSERT_EQ(stable.instances, 2);
  h.Kill("w1");
  std::vector<EpochPlan> proposed = Proposed(h.Updates());
  ASSERT_EQ(proposed.size(), 1u);
  const EpochPlan& p = proposed[0];
  EXPECT_EQ(p.world, 2);
  EXPECT_EQ(p.instances, 2);  // D = 1
  EXPECT_EQ(RankNames(p), (std::vector<std::string>{"w0", "w2"}));
  EXPECT_GT(p.summary.bytes_moved, 0);
}

}  // namespace
}  // namespace zshard::server
