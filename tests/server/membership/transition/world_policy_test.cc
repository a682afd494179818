// World size choice and rank assignment.
#include "server/membership/transition/world_policy.h"

#include "gtest/gtest.h"

namespace zshard::server {
namespace {

using job::ResizePolicy;

job::WorldSpec World(int instances, int min, int max,
                     ResizePolicy resize = ResizePolicy::kKeepI) {
  job::WorldSpec w;
  w.instances = instances;
  w.min = min;
  w.max = max;
  w.resize = resize;
  return w;
}

job::WorldSpec KeepD(int instances, int min, int max) {
  return World(instances, min, max, ResizePolicy::kKeepD);
}

RankLayout KeepILayout(int world) {
  return RankLayout{world, 1, ResizePolicy::kKeepI};
}

RankLayout KeepDLayout(int world, int instances) {
  return RankLayout{world, instances, ResizePolicy::kKeepD};
}

using Ids = std::vector<std::string>;

TEST(WorldPolicyTest, LargestMultipleOfInstancesWithinBounds) {
  EXPECT_EQ(ChooseWorld(5, World(2, 2, 4), 0), 4);  // max cap
  EXPECT_EQ(ChooseWorld(3, World(2, 2, 4), 0), 2);  // multiple of I
  EXPECT_EQ(ChooseWorld(1, World(2, 2, 4), 0), 0);  // min not met
  EXPECT_EQ(ChooseWorld(0, World(1, 1, 4), 0), 0);
  EXPECT_EQ(ChooseWorld(7, World(4, 4, 16), 0), 4);
  EXPECT_EQ(ChooseWorld(3, World(2, 3, 8), 0), 0);  // 2 < min 3
  EXPECT_EQ(ChooseWorld(5, World(2, 3, 8), 0), 4);
  EXPECT_EQ(ChooseWorld(100, World(8, 8, 64), 0), 64);
  EXPECT_EQ(ChooseWorld(100, World(8, 8, 64), 16), 16);  // target cap
}

TEST(WorldPolicyTest, SurvivorsKeepRanksAndSparesFillHoles) {
  std::vector<RankCandidate> c = {{"a", 0, false, 1, ""},
                                  {"c", 2, false, 3, ""},
                                  {"d", 3, false, 4, ""},
                                  {"e", -1, true, 5, ""},
                                  {"f", -1, false, 6, ""}};
  std::vector<std::string> ranks = AssignRanks(KeepILayout(4), c);
  EXPECT_EQ(ranks, (std::vector<std::string>{"a", "e", "c", "d"}));
}

TEST(WorldPolicyTest, DisplacedSurvivorsFillHolesBeforeSpares) {
  // World shrinks 4 -> 2 after rank 0 died: rank 3's holder moves down.
  std::vector<RankCandidate> c = {
      {"b", 1, false, 2, ""}, {"d", 3, false, 4, ""}, {"s", -1, true, 5, ""}};
  EXPECT_EQ(AssignRanks(KeepILayout(2), c),
            (std::vector<std::string>{"d", "b"}));
}

TEST(WorldPolicyTest, NewcomersFillInJoinOrder) {
  std::vector<RankCandidate> c = {{"z", -1, false, 9, ""},
                                  {"y", -1, false, 2, ""},
                                  {"x", -1, false, 5, ""}};
  EXPECT_EQ(AssignRanks(KeepILayout(2), c),
            (std::vector<std::string>{"y", "x"}));
}

TEST(WorldPolicyTest, KeepDWholeInstancesOfAFixedShardGroup) {
  // D = 4 / 2 = 2: worlds 2 and 4 only.
  EXPECT_EQ(ChooseWorld(5, KeepD(2, 2, 4), 0), 4);
  EXPECT_EQ(ChooseWorld(4, KeepD(2, 2, 4), 0), 4);
  EXPECT_EQ(ChooseWorld(3, KeepD(2, 2, 4), 0), 2);
  EXPECT_EQ(ChooseWorld(1, KeepD(2, 2, 4), 0), 0);
  // D = 128: I' = 7 with one rank short of 8 instances.
  EXPECT_EQ(ChooseWorld(1023, KeepD(8, 128, 1024), 0), 896);
  EXPECT_EQ(ChooseWorld(1029, KeepD(8, 128, 1024), 0), 1024);
  EXPECT_EQ(ChooseWorld(200, KeepD(8, 128, 1024), 0), 128);
  EXPECT_EQ(ChooseWorld(127, KeepD(8, 128, 1024), 0), 0);
  // min: one instance of D=4 is below min 8.
  EXPECT_EQ(ChooseWorld(7, KeepD(4, 8, 16), 0), 0);
  EXPECT_EQ(ChooseWorld(9, KeepD(4, 8, 16), 0), 8);
  // target caps the instances.
  EXPECT_EQ(ChooseWorld(16, KeepD(4, 4, 16), 8), 8);
  EXPECT_EQ(ChooseWorld(16, KeepD(4, 4, 16), 10), 8);
  // keep_i on the same bounds changes D instead.
  EXPECT_EQ(ChooseWorld(1023, World(8, 128, 1024), 0), 1016);
  EXPECT_EQ(ChooseWorld(3, World(2, 2, 4), 0), 2);
}

TEST(WorldPolicyTest, KeepDFailureWithoutSpareDissolvesTheInstance) {
  // W=4, I=2, D=2: a b | c d; b died, no spare: W=2, I'=1. The whole
  // instance {c, d} stays (renumbered 0); a becomes a spare.
  std::vector<RankCandidate> c = {
      {"a", 0, false, 1, ""}, {"c", 2, false, 3, ""}, {"d", 3, false, 4, ""}};
  EXPECT_EQ(ChooseWorld(3, KeepD(2, 2, 4), 0), 2);
  EXPECT_EQ(AssignRanks(KeepDLayout(2, 1), c), (Ids{"c", "d"}));
  // keep_i instead keeps I=2 at D=1: ranks 2 and 3 no longer fit, c (the
  // lower) moves down to rank 1.
  EXPECT_EQ(AssignRanks(KeepILayout(2), c), (Ids{"a", "c"}));
}

TEST(WorldPolicyTest, KeepDSpareTakesTheFailedRank) {
  std::vector<RankCandidate> c = {{"a", 0, false, 1, ""},
                                  {"c", 2, false, 3, ""},
                                  {"d", 3, false, 4, ""},
                                  {"s", -1, true, 5, ""}};
  EXPECT_EQ(ChooseWorld(4, KeepD(2, 2, 4), 0), 4);
  EXPECT_EQ(AssignRanks(KeepDLayout(4, 2), c), (Ids{"a", "s", "c", "d"}));
}

TEST(WorldPolicyTest, KeepDWholeInstancesStayTogetherRenumberedInOrder) {
  // I=4, D=2: a b | c d | e f | g h; c died: W=6, I'=3 of the whole
  // instances 0, 2 and 3; d becomes a spare.
  std::vector<RankCandidate> c = {
      {"a", 0, false, 1, ""}, {"b", 1, false, 2, ""}, {"d", 3, false, 4, ""},
      {"e", 4, false, 5, ""}, {"f", 5, false, 6, ""}, {"g", 6, false, 7, ""},
      {"h", 7, false, 8, ""}};
  EXPECT_EQ(ChooseWorld(7, KeepD(4, 2, 8), 0), 6);
  EXPECT_EQ(AssignRanks(KeepDLayout(6, 3), c),
            (Ids{"a", "b", "e", "f", "g", "h"}));
}

TEST(WorldPolicyTest, KeepDHalfInstancesJoinByShardRank) {
  // a b | c d with b and c dead: a holds shard 0, d shard 1: together a
  // whole instance, no bytes move.
  std::vector<RankCandidate> c = {{"a", 0, false, 1, ""},
                                  {"d", 3, false, 4, ""}};
  EXPECT_EQ(AssignRanks(KeepDLayout(2, 1), c), (Ids{"a", "d"}));
  // I=3, D=2: a b | c d | e f with b and e dead: instance 1 stays whole,
  // instance 0 keeps a at shard 0 and takes f (shard 1) from instance 2.
  c = {{"a", 0, false, 1, ""},
       {"c", 2, false, 3, ""},
       {"d", 3, false, 4, ""},
       {"f", 5, false, 6, ""}};
  EXPECT_EQ(AssignRanks(KeepDLayout(4, 2), c), (Ids{"a", "f", "c", "d"}));
  // A hole no survivor of its shard can fill takes a spare before another
  // shard's survivor.
  c = {{"a", 0, false, 1, ""},
       {"c", 2, false, 3, ""},
       {"e", 4, false, 5, ""},
       {"s", -1, true, 9, ""}};
  EXPECT_EQ(AssignRanks(KeepDLayout(4, 2), c), (Ids{"a", "s", "c", "e"}));
}

TEST(WorldPolicyTest, KeepDJoinersWaitForAWholeInstance) {
  // W=4, I=2 at full size: one joiner is a spare (the world stays).
  EXPECT_EQ(ChooseWorld(5, KeepD(2, 2, 4), 0), 4);
  // After the dissolve above (c d at W=2, spare a): one joiner n makes D
  // spares, a whole new instance behind the surviving one.
  std::vector<RankCandidate> c = {{"c", 0, false, 3, ""},
                                  {"d", 1, false, 4, ""},
                                  {"n", -1, false, 9, ""},
                                  {"a", -1, true, 1, ""}};
  EXPECT_EQ(ChooseWorld(4, KeepD(2, 2, 4), 0), 4);
  EXPECT_EQ(AssignRanks(KeepDLayout(4, 2), c), (Ids{"c", "d", "a", "n"}));
  // The first epoch: spares, then newcomers, in join order.
  c = {
      {"z", -1, false, 9, ""}, {"y", -1, false, 2, ""}, {"x", -1, true, 5, ""}};
  EXPECT_EQ(AssignRanks(KeepDLayout(2, 1), c), (Ids{"x", "y"}));
}

}  // namespace
}  // namespace zshard::server
