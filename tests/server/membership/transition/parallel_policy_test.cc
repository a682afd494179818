// The world policy of model-parallel jobs: whole replicas, positions kept,
// tensor-parallel groups on one node.
#include "server/membership/transition/parallel_policy.h"

#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "gtest/gtest.h"

namespace zshard::server {
namespace {

using Ids = std::vector<std::string>;

// T = 2, P = 2 (C = 1): rank = tp + 2 x (replica + R x pp); world 4..8 in
// two instances per slot.
job::JobSpec Tp2Pp2(job::ResizePolicy resize = job::ResizePolicy::kKeepD) {
  job::JobSpec job;
  job.parallel.tensor = 2;
  job.parallel.pipeline = 2;
  job.world.instances = 2;
  job.world.min = 4;
  job.world.max = 8;
  job.world.resize = resize;
  return job;
}

RankCandidate Survivor(const std::string& id, int prev_rank) {
  return RankCandidate{id, prev_rank, false, prev_rank, ""};
}

RankCandidate Fresh(const std::string& id, int64_t seq, bool spare = false,
                    const std::string& node = "") {
  return RankCandidate{id, -1, spare, 100 + seq, node};
}

TEST(ParallelPolicyTest, WorldsAreWholeReplicas) {
  const auto any = [](int) { return true; };
  EXPECT_EQ(ChooseParallelWorld(9, Tp2Pp2(), 0, any), 8);
  EXPECT_EQ(ChooseParallelWorld(7, Tp2Pp2(), 0, any), 4);
  EXPECT_EQ(ChooseParallelWorld(3, Tp2Pp2(), 0, any), 0);
  EXPECT_EQ(ChooseParallelWorld(9, Tp2Pp2(), 4, any), 4);  // target
  // A world the plan cannot be made for is skipped downwards.
  EXPECT_EQ(ChooseParallelWorld(9, Tp2Pp2(), 0, [](int w) { return w != 8; }),
            4);
  // Context parallelism: the data-parallel size is a multiple of C.
  job::JobSpec cp = Tp2Pp2(job::ResizePolicy::kKeepI);
  cp.parallel.pipeline = 1;
  cp.parallel.context = 2;
  cp.world.instances = 1;
  cp.world.min = 4;
  cp.world.max = 12;
  EXPECT_EQ(ChooseParallelWorld(11, cp, 0, any), 8);
  EXPECT_NE(ExplainParallelWorld(8, 9, Tp2Pp2(), 0).find("4 workers a replica"),
            std::string::npos)
      << ExplainParallelWorld(8, 9, Tp2Pp2(), 0);
}

TEST(ParallelPolicyTest, ASpareTakesTheDeadWorkersPosition) {
  std::vector<RankCandidate> c;
  for (int r = 0; r < 8; ++r) {
    if (r != 5) c.push_back(Survivor("w" + std::to_string(r), r));
  }
  c.push_back(Fresh("spare", 0, /*spare=*/true));
  const Ids ranks = AssignParallelRanks(Tp2Pp2(), 8, 8, c);
  EXPECT_EQ(absl::StrJoin(ranks, ","), "w0,w1,w2,w3,w4,spare,w6,w7");
}

TEST(ParallelPolicyTest, WithoutASpareTheReplicaIsDissolved) {
  // Rank 2 (replica 1, tp 0, pp 0) is gone: replica 0 (ranks 0, 1, 4, 5)
  // stays whole in its positions at R = 1 (ranks 0, 1, 2, 3).
  std::vector<RankCandidate> c;
  for (int r = 0; r < 8; ++r) {
    if (r != 2) c.push_back(Survivor("w" + std::to_string(r), r));
  }
  const Ids ranks = AssignParallelRanks(Tp2Pp2(), 4, 8, c);
  EXPECT_EQ(absl::StrJoin(ranks, ","), "w0,w1,w4,w5");
  // Rank 4 (replica 0, pp 1) is gone: replica 1 stays, renumbered 0.
  c.clear();
  for (int r = 0; r < 8; ++r) {
    if (r != 4) c.push_back(Survivor("w" + std::to_string(r), r));
  }
  EXPECT_EQ(absl::StrJoin(AssignParallelRanks(Tp2Pp2(), 4, 8, c), ","),
            "w2,w3,w6,w7");
}

TEST(ParallelPolicyTest, ANewReplicaTakesTheSameSlotSurvivorsFirst) {
  // World 4 -> 8: replica 0 survives; survivors of a dissolved replica at
  // the same positions hold those slots' state and come before newcomers.
  std::vector<RankCandidate> c = {Survivor("a", 0), Survivor("b", 1),
                                  Survivor("c", 2), Survivor("d", 3)};
  for (int k = 0; k < 4; ++k) c.push_back(Fresh("n" + std::to_string(k), k));
  const Ids ranks = AssignParallelRanks(Tp2Pp2(), 8, 4, c);
  // R = 2: replica 0 = ranks 0, 1 (pp 0) and 4, 5 (pp 1).
  EXPECT_EQ(ranks[0], "a");
  EXPECT_EQ(ranks[1], "b");
  EXPECT_EQ(ranks[4], "c");
  EXPECT_EQ(ranks[5], "d");
  EXPECT_EQ(absl::StrJoin(ranks, ","), "a,b,n0,n1,c,d,n2,n3");
}

TEST(ParallelPolicyTest, TensorGroupsArePlacedOnOneNode) {
  // Newcomers alternate between two nodes in join order; each
  // tensor-parallel pair still lands on one node.
  std::vector<RankCandidate> c;
  for (int k = 0; k < 8; ++k) {
    c.push_back(Fresh("n" + std::to_string(k), k, false,
                      k % 2 == 0 ? "node-a" : "node-b"));
  }
  const Ids ranks = AssignParallelRanks(Tp2Pp2(), 8, 0, c);
  std::vector<std::string> nodes;
  for (const std::string& id : ranks) {
    nodes.push_back((id[1] - '0') % 2 == 0 ? "node-a" : "node-b");
  }
  for (int first = 0; first < 8; first += 2) {
    EXPECT_EQ(nodes[first], nodes[first + 1]) << absl::StrJoin(ranks, ",");
  }
  const std::vector<std::string> text =
      DescribeTensorPlacement(Tp2Pp2().parallel, 8, nodes);
  ASSERT_EQ(text.size(), 1u);
  EXPECT_NE(text[0].find("on one node: 4 of 4"), std::string::npos) << text[0];
}

TEST(ParallelPolicyTest, APlacementThatCannotBeKeptIsNamed) {
  // Three workers on node-a, five on node-b: one pair must span both.
  const std::vector<std::string> nodes = {"a", "a", "a", "b",
                                          "b", "b", "b", "b"};
  const std::vector<std::string> text =
      DescribeTensorPlacement(Tp2Pp2().parallel, 8, nodes);
  ASSERT_EQ(text.size(), 2u);
  EXPECT_NE(text[0].find("on one node: 3 of 4"), std::string::npos) << text[0];
  EXPECT_NE(text[1].find("replica 1 pp 0 cp 0 spans a, b"), std::string::npos)
      << text[1];
  // No labels at all: none is kept, and that is why.
  const std::vector<std::string> none = DescribeTensorPlacement(
      Tp2Pp2().parallel, 8, std::vector<std::string>(8));
  ASSERT_EQ(none.size(), 2u);
  EXPECT_NE(none[1].find("without a node label"), std::string::npos) << none[1];
}

}  // namespace
}  // namespace zshard::server
