// The dashboard's views: the measured ledger of a rank, the world policy
// and the cluster explained in words.
#include <string>

#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "server/membership/transition/world_policy.h"
#include "server/views/explain.h"
#include "server/views/measured_ledger.h"

namespace zshard::server {
namespace {

plan::StageBytes Predicted() {
  plan::StageBytes b;
  b.param_bytes = 2000;
  b.grad_bytes = 2000;
  b.master_bytes = 1000;
  b.exp_avg_bytes = 1000;
  b.exp_avg_sq_bytes = 1000;
  return b;
}

TEST(MeasuredLedgerTest, JoinsPredictedAndMeasured) {
  RankLedgerView none = MakeRankLedger(Predicted(), std::nullopt);
  EXPECT_EQ(none.predicted_bytes, 7000);
  EXPECT_EQ(none.measured_bytes, -1);
  EXPECT_EQ(none.categories.at("master").measured, -1);

  std::map<std::string, int64_t> measured = {
      {"param", 2000},   {"grad", 2000},      {"master", 1000},
      {"exp_avg", 1000}, {"exp_avg_sq", 900}, {"comm", 64}};
  RankLedgerView v = MakeRankLedger(Predicted(), measured);
  EXPECT_EQ(v.measured_bytes, 6900);
  EXPECT_EQ(v.comm_bytes, 64);  // outside the ledger's total
  EXPECT_EQ(v.categories.size(), 5u);
  EXPECT_EQ(v.categories.at("exp_avg_sq").predicted, 1000);
  EXPECT_EQ(v.categories.at("exp_avg_sq").measured, 900);
  measured.erase("grad");
  EXPECT_EQ(
      MakeRankLedger(Predicted(), measured).categories.at("grad").measured, 0);
}

TEST(ExplainWorldTest, NamesThePolicyInputs) {
  job::WorldSpec world;
  world.instances = 2;
  world.min = 2;
  world.max = 4;
  EXPECT_EQ(ExplainWorld(ChooseWorld(5, world, 0), 5, world, 0),
            "world 4 = largest multiple of I=2 within [min 2, min(healthy 5, "
            "max 4)] (keep_i: I fixed, D = W / I follows the world)");
  EXPECT_EQ(ExplainWorld(ChooseWorld(3, world, 0), 3, world, 0),
            "world 2 = largest multiple of I=2 within [min 2, min(healthy 3, "
            "max 4)] (keep_i: I fixed, D = W / I follows the world)");
  EXPECT_EQ(ExplainWorld(ChooseWorld(1, world, 0), 1, world, 0),
            "no world: no multiple of I=2 within [min 2, min(healthy 1, max "
            "4)] (keep_i)");
  EXPECT_NE(ExplainWorld(2, 5, world, 2).find("target 2"), std::string::npos);
}

TEST(ExplainWorldTest, KeepDNamesTheShardGroupAndTheSpares) {
  job::WorldSpec world;
  world.instances = 4;
  world.min = 4;
  world.max = 16;
  world.resize = job::ResizePolicy::kKeepD;
  EXPECT_EQ(ExplainWorld(ChooseWorld(11, world, 0), 11, world, 0),
            "world 8 = 2 instance(s) of D=4 within [min 4, min(healthy 11, "
            "max 16)] (keep_d: D fixed; 3 healthy spare(s) wait for a whole "
            "instance)");
  EXPECT_EQ(ExplainWorld(ChooseWorld(16, world, 0), 16, world, 0),
            "world 16 = 4 instance(s) of D=4 within [min 4, min(healthy 16, "
            "max 16)] (keep_d: D fixed)");
  EXPECT_EQ(ExplainWorld(ChooseWorld(18, world, 0), 18, world, 0),
            "world 16 = 4 instance(s) of D=4 within [min 4, min(healthy 18, "
            "max 16)] (keep_d: D fixed; 2 healthy spare(s) are beyond max)");
  EXPECT_EQ(ExplainWorld(ChooseWorld(18, world, 8), 18, world, 8),
            "world 8 = 2 instance(s) of D=4 within [min 4, min(healthy 18, "
            "max 16, target 8)] (keep_d: D fixed; 10 healthy spare(s) are "
            "beyond the target)");
  EXPECT_EQ(ExplainWorld(ChooseWorld(3, world, 0), 3, world, 0),
            "no world: no multiple of D=4 within [min 4, min(healthy 3, max "
            "16)] (keep_d)");
}

MemberView Mv(const std::string& name, MemberState state, int rank) {
  MemberView v;
  v.member.name = name;
  v.member.state = state;
  v.member.rank = rank;
  if (state == MemberState::kDead) v.member.reason = "lease expired";
  return v;
}

TEST(ExplainClusterTest, SaysWhyTheWorldRanksAndSpares) {
  ClusterView view;
  view.epoch = 3;
  view.world = 2;
  view.instances = 2;
  view.members = {
      Mv("w0", MemberState::kActive, 0), Mv("w2", MemberState::kActive, 1),
      Mv("w3", MemberState::kSpare, -1), Mv("w1", MemberState::kDead, -1)};
  job::WorldSpec world;
  world.instances = 2;
  world.min = 2;
  world.max = 2;
  std::vector<Event> events = {
      {1, 2, "propose", "epoch 3 world 2: member w1's lease expired"}};
  std::string text =
      absl::StrJoin(ExplainCluster(view, world, events, 300), " ");
  EXPECT_NE(text.find("Epoch 3 runs a world of 2 rank(s) in 2 instance(s)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("World policy keep_i (set by world.resize): I = 2 "
                      "stays fixed and D = W / I follows the world"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("With 3 healthy member(s) the policy gives world 2 = "
                      "largest multiple of I=2 within [min 2, min(healthy 3, "
                      "max 2)] (keep_i: I fixed, D = W / I follows the "
                      "world)."),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("survivors keep their ranks and a spare takes"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("Ranks: 0=w0, 1=w2"), std::string::npos) << text;
  EXPECT_NE(text.find("1 spare(s): w3"), std::string::npos) << text;
  EXPECT_NE(text.find("w1 (DEAD: lease expired)"), std::string::npos) << text;
  EXPECT_NE(text.find("member w1's lease expired"), std::string::npos) << text;
  EXPECT_NE(
      text.find("Membership changes that arrive within 300 ms of each "
                "other are gathered into one proposal (made once 300 "
                "ms pass without a change, at most 3000 ms after the "
                "first, 30000 ms while the job forms and no epoch has "
                "committed); a change that alters the world of a proposal "
                "in flight supersedes it instead of waiting for it."),
      std::string::npos)
      << text;

  view.members.pop_back();
  view.members.erase(view.members.begin() + 2);
  text = absl::StrJoin(ExplainCluster(view, world, {}, 0), " ");
  EXPECT_NE(text.find("There are no spares."), std::string::npos) << text;
  EXPECT_NE(text.find("Each membership change is proposed at once"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("last transition"), std::string::npos) << text;
}

TEST(ExplainClusterTest, NamesQuarantinedSuspectedMembersAndIsolation) {
  ClusterView view;
  view.epoch = 4;
  view.world = 2;
  view.members = {Mv("w0", MemberState::kActive, 0),
                  Mv("w1", MemberState::kActive, 1),
                  Mv("w2", MemberState::kSpare, -1)};
  view.members[1].suspect = true;
  view.members[2].quarantine = "apart from w0 for 590 s: its link failed";
  job::WorldSpec world;
  world.min = 2;
  world.max = 2;
  std::string text = absl::StrJoin(ExplainCluster(view, world, {}, 0), " ");
  EXPECT_NE(text.find("Quarantined after a broken link: w2 (apart from w0 "
                      "for 590 s: its link failed)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("Suspected by a peer: w1"), std::string::npos) << text;
  EXPECT_EQ(text.find("isolated"), std::string::npos) << text;
  view.isolated = true;
  view.isolated_ms = 2500;
  text = absl::StrJoin(ExplainCluster(view, world, {}, 0), " ");
  EXPECT_NE(text.find("The coordinator is isolated: most members have been "
                      "silent for 2500 ms at once"),
            std::string::npos)
      << text;
}

TEST(ExplainClusterTest, SaysKeepDAppliesAndWhy) {
  ClusterView view;
  view.epoch = 2;
  view.world = 2;
  view.instances = 1;
  view.members = {
      Mv("w2", MemberState::kActive, 0), Mv("w3", MemberState::kActive, 1),
      Mv("w0", MemberState::kSpare, -1), Mv("w1", MemberState::kDead, -1)};
  job::WorldSpec world;
  world.instances = 2;
  world.min = 2;
  world.max = 4;
  world.resize = job::ResizePolicy::kKeepD;
  std::string text = absl::StrJoin(ExplainCluster(view, world, {}, 0), " ");
  EXPECT_NE(text.find("Epoch 2 runs a world of 2 rank(s) in 1 instance(s) of "
                      "2 rank(s) each."),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("World policy keep_d (the default when "
                      "world.instances >= 2): D = max / instances = 2 stays "
                      "fixed and whole instances come and go (1 to 2); a "
                      "failed rank with no spare dissolves its instance"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("the policy gives world 2 = 1 instance(s) of D=2 within "
                      "[min 2, min(healthy 3, max 4)] (keep_d: D fixed; 1 "
                      "healthy spare(s) wait for a whole instance)."),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("survivors keep their shard ranks, whole instances "
                      "stay together"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("1 spare(s): w0; they are healthy members beyond the "
                      "world (whole instances of D=2, at most max 4)"),
            std::string::npos)
      << text;
  world.instances = 1;
  world.resize = job::ResizePolicy::kKeepI;
  text = absl::StrJoin(ExplainCluster(view, world, {}, 0), " ");
  EXPECT_NE(text.find("World policy keep_i (the default when world.instances "
                      "== 1)"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace zshard::server
