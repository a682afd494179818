// World size choice and rank assignment.
#include "server/membership/world_policy.h"

#include "gtest/gtest.h"

namespace zshard::server {
namespace {

job::WorldSpec World(int instances, int min, int max) {
  job::WorldSpec w;
  w.instances = instances;
  w.min = min;
  w.max = max;
  return w;
}

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
  std::vector<RankCandidate> c = {{"a", 0, false, 1},
                                  {"c", 2, false, 3},
                                  {"d", 3, false, 4},
                                  {"e", -1, true, 5},
                                  {"f", -1, false, 6}};
  std::vector<std::string> ranks = AssignRanks(4, c);
  EXPECT_EQ(ranks, (std::vector<std::string>{"a", "e", "c", "d"}));
}

TEST(WorldPolicyTest, DisplacedSurvivorsFillHolesBeforeSpares) {
  // World shrinks 4 -> 2 after rank 0 died: rank 3's holder moves down.
  std::vector<RankCandidate> c = {
      {"b", 1, false, 2}, {"d", 3, false, 4}, {"s", -1, true, 5}};
  EXPECT_EQ(AssignRanks(2, c), (std::vector<std::string>{"d", "b"}));
}

TEST(WorldPolicyTest, NewcomersFillInJoinOrder) {
  std::vector<RankCandidate> c = {
      {"z", -1, false, 9}, {"y", -1, false, 2}, {"x", -1, false, 5}};
  EXPECT_EQ(AssignRanks(2, c), (std::vector<std::string>{"y", "x"}));
}

}  // namespace
}  // namespace zshard::server
