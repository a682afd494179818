// The engine's groups and buffers with expert params: the group arithmetic
// of docs/design.md sections 2 and 4 (worked by hand), its agreement with the
// planner's ownership for every rank, the byte accounting against the
// ledger's ZeRO-1 figures, each rank's expert params starting from its
// expert-parallel rank's values, and the traffic count per shard group.
#include "client/worker/engine/engine_groups.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/worker/engine/elements.h"
#include "client/worker/engine/engine_buffers.h"
#include "client/worker/engine/master_dump.h"
#include "common/plan/ledger.h"
#include "common/plan/ownership.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/worker/engine/buffer_readback.h"
#include "tests/worker/engine/engine_cluster.h"
#include "tests/worker/engine/expert_model.h"

namespace zshard::engine {
namespace {

TEST(EngineGroupsTest, GroupsOfOneRankWorkedByHand) {
  const plan::ModelSpec model = testing::ExpertModel();
  // W = 8, I = 2 (D = 4), E = 2: expert shard groups of D / E = 2 ranks.
  const plan::Plan plan = testing::ExpertPlan(model, 8, 2, 2);
  const GroupPosition pos = PositionOf(plan, 7);
  EXPECT_EQ(pos.instance, 1);
  EXPECT_EQ(pos.shard_rank, 3);
  EXPECT_EQ(pos.expert_rank, 1);
  EXPECT_EQ(pos.expert_shard, 1);
  const EngineGroupSpecs g = MakeGroupSpecs(plan, 7, "job");
  EXPECT_EQ(g.intra.name, "job/intra/1");
  EXPECT_EQ(g.intra.members, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(g.intra.rank, 3);
  EXPECT_EQ(g.expert.name, "job/expert/1/1");
  EXPECT_EQ(g.expert.members, (std::vector<int>{5, 7}));
  EXPECT_EQ(g.expert.rank, 1);
  EXPECT_EQ(g.inter.name, "job/inter/3");
  EXPECT_EQ(g.inter.members, (std::vector<int>{3, 7}));
  EXPECT_EQ(g.inter.rank, 1);
  const EngineGroupSpecs g4 = MakeGroupSpecs(plan, 4, "job");
  EXPECT_EQ(g4.expert.members, (std::vector<int>{4, 6}));
  EXPECT_EQ(g4.expert.rank, 0);
  // Dense params are no expert-parallel rank's.
  EXPECT_EQ(StateExpertRank(model, plan, 7, 0), 0);
  EXPECT_EQ(StateExpertRank(model, plan, 7, 1), 1);
  // D = 8, E = 4: groups of 2, expert-parallel rank fastest.
  const plan::Plan wide = testing::ExpertPlan(model, 8, 1, 4);
  EXPECT_EQ(MakeGroupSpecs(wide, 6, "j").expert.members,
            (std::vector<int>{2, 6}));
  EXPECT_EQ(MakeGroupSpecs(wide, 6, "j").expert.rank, 1);
}

// Every rank's expert and dense windows are the planner's: the ownership
// lists each owned piece under the rank with the expert rank the engine
// derives, and the expert group's members all hold the same bucket's
// other shards.
TEST(EngineGroupsTest, WindowsAgreeWithThePlannersOwnership) {
  const plan::ModelSpec model = testing::ExpertModel();
  for (auto [world, instances, experts] :
       {std::tuple{4, 1, 2}, std::tuple{8, 2, 2}, std::tuple{8, 1, 4},
        std::tuple{4, 2, 2}, std::tuple{8, 2, 4}}) {
    SCOPED_TRACE(::testing::Message()
                 << "W=" << world << " I=" << instances << " E=" << experts);
    const plan::Plan plan =
        testing::ExpertPlan(model, world, instances, experts);
    std::vector<plan::Member> members;
    for (int r = 0; r < world; ++r) {
      members.push_back({absl::StrCat("m", r), ""});
    }
    absl::StatusOr<plan::Ownership> own =
        plan::MakeOwnership(model, plan, members);
    ASSERT_TRUE(own.ok()) << own.status();
    // (param, expert rank, begin, end, rank) of every owned range.
    std::map<std::tuple<int, int, int64_t, int64_t, int>, int> want;
    for (const plan::OwnedRange& r : own->ranges) {
      ++want[{r.param_index, r.expert_rank, r.begin, r.end, r.rank}];
    }
    std::map<std::tuple<int, int, int64_t, int64_t, int>, int> got;
    for (int r = 0; r < world; ++r) {
      const plan::RankPlan rp = plan::MakeRankPlan(model, plan, r);
      for (const plan::Shard& s : rp.shards) {
        for (const plan::Piece& p : s.pieces) {
          ++got[{p.param_index, StateExpertRank(model, plan, r, p.param_index),
                 p.param_start, p.param_end, r}];
        }
      }
      // The expert group's members split each expert bucket between them.
      const EngineGroupSpecs g = MakeGroupSpecs(plan, r, "x");
      ASSERT_EQ(g.expert.size(), plan.shard_group_size / experts);
      EXPECT_EQ(g.expert.members[g.expert.rank], r);
      for (int m : g.expert.members) {
        EXPECT_EQ(PositionOf(plan, m).expert_rank,
                  PositionOf(plan, r).expert_rank);
        EXPECT_EQ(PositionOf(plan, m).instance, PositionOf(plan, r).instance);
      }
    }
    EXPECT_EQ(got, want);
  }
}

TEST(EngineGroupsTest, MemoryEqualsLedgerZero1BytesWithExperts) {
  for (const plan::DType dtype : {plan::DType::kBf16, plan::DType::kFp32}) {
    const plan::ModelSpec model = testing::ExpertModel(dtype);
    for (auto [world, instances, experts] :
         {std::tuple{4, 1, 1}, std::tuple{4, 1, 2}, std::tuple{4, 1, 4},
          std::tuple{8, 2, 2}, std::tuple{8, 1, 4}}) {
      const plan::Plan plan =
          testing::ExpertPlan(model, world, instances, experts, 4000);
      auto workloads = testing::ExpertWorkloads(model, world, experts, 8);
      int64_t expert_master = -1;
      for (int rank = 0; rank < world; ++rank) {
        absl::StatusOr<std::unique_ptr<EngineBuffers>> b =
            EngineBuffers::Create(model, plan, rank, *workloads[rank]);
        ASSERT_TRUE(b.ok()) << b.status();
        const MemoryBytes got = (*b)->memory();
        const plan::StageBytes want =
            plan::RankStageBytes(model, plan, rank, plan::Stage::kZero1);
        EXPECT_EQ(got.param, want.param_bytes) << "rank " << rank;
        EXPECT_EQ(got.grad, want.grad_bytes) << "rank " << rank;
        EXPECT_EQ(got.master, want.master_bytes) << "rank " << rank;
        EXPECT_EQ(got.exp_avg, want.exp_avg_bytes) << "rank " << rank;
        EXPECT_EQ(got.exp_avg_sq, want.exp_avg_sq_bytes) << "rank " << rank;
        EXPECT_EQ(got.total(), want.total_bytes) << "rank " << rank;
        // Not a tautology: the expert windows are 1 / (D / E) of their
        // buffer, the dense ones 1 / D.
        int64_t dense = 0, expert = 0;
        for (const WindowState& w : (*b)->windows()) {
          (plan.buffers[w.buffer].key.expert ? expert : dense) += w.size();
        }
        const int64_t d = plan.shard_group_size;
        int64_t dense_numel = 0, expert_numel = 0;
        for (const plan::Buffer& buf : plan.buffers) {
          (buf.key.expert ? expert_numel : dense_numel) += buf.numel;
        }
        EXPECT_EQ(dense * d, dense_numel);
        EXPECT_EQ(expert * (d / experts), expert_numel);
        if (expert_master < 0) expert_master = expert;
        EXPECT_EQ(expert, expert_master);
      }
    }
  }
}

TEST(EngineGroupsTest, ExpertParamsStartFromTheRanksExpertValues) {
  const plan::ModelSpec model = testing::ExpertModel();
  const plan::Plan plan = testing::ExpertPlan(model, 4, 1, 2);
  auto workloads = testing::ExpertWorkloads(model, 4, 2, 8);
  const int64_t total = model.numel();
  for (int rank = 0; rank < 4; ++rank) {
    absl::StatusOr<std::unique_ptr<EngineBuffers>> b =
        EngineBuffers::Create(model, plan, rank, *workloads[rank]);
    ASSERT_TRUE(b.ok()) << b.status();
    const int e = rank % 2;
    // x1 is the expert param at global elements [2000, 3500).
    const std::vector<float> x1 = zshard::testing::Param(**b, 3);
    EXPECT_EQ(x1[7],
              RoundTo(plan::DType::kBf16,
                      SyntheticWorkload::InitialValue(2007 + e * total)));
    const std::vector<float> d1 = zshard::testing::Param(**b, 2);
    EXPECT_EQ(d1[7], RoundTo(plan::DType::kBf16,
                             SyntheticWorkload::InitialValue(1707)));
    // Each owned master equals the param element it shadows.
    for (size_t w = 0; w < (*b)->windows().size(); ++w) {
      const WindowState& win = (*b)->windows()[w];
      for (const plan::Piece& piece : win.pieces) {
        const std::vector<float> param =
            zshard::testing::Param(**b, piece.param_index);
        for (int64_t j = piece.start; j < piece.end; ++j) {
          ASSERT_EQ((*b)->master(static_cast<int>(w))[j - win.start],
                    param[piece.param_start + (j - piece.start)]);
        }
      }
    }
  }
}

// Dumps carry the expert rank of expert pieces; the loader puts each
// expert-parallel rank's copy in its place and refuses a dump read with
// the wrong E.
TEST(EngineGroupsTest, MasterDumpsKeepExpertRanksApart) {
  const plan::ModelSpec model = testing::ExpertModel();
  const plan::Plan plan = testing::ExpertPlan(model, 4, 1, 2);
  auto workloads = testing::ExpertWorkloads(model, 4, 2, 8);
  const std::string dir = ::testing::TempDir() + "/expert_dump";
  std::filesystem::remove_all(dir);
  for (int rank = 0; rank < 4; ++rank) {
    auto b = EngineBuffers::Create(model, plan, rank, *workloads[rank]);
    ASSERT_TRUE(b.ok()) << b.status();
    ASSERT_TRUE(DumpMasters(**b, dir).ok());
  }
  std::ifstream in(dir + "/index-3.json");
  const nlohmann::json index = nlohmann::json::parse(in);
  int expert_entries = 0;
  for (const nlohmann::json& e : index) {
    const bool expert = e["param"].get<std::string>()[0] == 'x';
    EXPECT_EQ(e.contains("expert_rank"), expert) << e.dump();
    if (expert) {
      EXPECT_EQ(e["expert_rank"], 1);
      ++expert_entries;
    }
  }
  EXPECT_GT(expert_entries, 0);
  auto masters = LoadMasters(dir, model, 2);
  ASSERT_TRUE(masters.ok()) << masters.status();
  const int64_t total = model.numel();
  const std::vector<float>& x0 = masters->at("x0");  // elements 1000..1699
  ASSERT_EQ(x0.size(), 1400u);
  EXPECT_EQ(x0[3],
            RoundTo(plan::DType::kBf16, SyntheticWorkload::InitialValue(1003)));
  EXPECT_EQ(x0[700 + 3],
            RoundTo(plan::DType::kBf16,
                    SyntheticWorkload::InitialValue(1003 + total)));
  EXPECT_EQ(masters->at("d0").size(), 1000u);
  EXPECT_EQ(LoadMasters(dir, model).status().code(),
            absl::StatusCode::kInvalidArgument);
  // Rank 3's expert pieces relabelled as expert rank 0's: expert rank 1's
  // second shard is missing, and the replicas of expert rank 0 disagree.
  nlohmann::json relabelled = index;
  for (nlohmann::json& e : relabelled) {
    if (e.contains("expert_rank")) e["expert_rank"] = 0;
  }
  std::ofstream(dir + "/index-3.json") << relabelled.dump();
  EXPECT_EQ(LoadMasters(dir, model, 2).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(EngineGroupsTest, TrafficCountsEachBuffersShardGroup) {
  // One dense and one expert param of 4096 elements, bucket 4096: W = 4,
  // I = 1, E = 2 reduce-scatters the dense bucket over 4 ranks (windows of
  // 1024) and the expert bucket over 2 (windows of 2048).
  plan::ModelSpec model;
  model.name = "two";
  for (const bool expert : {false, true}) {
    plan::ParamSpec p;
    p.name = expert ? "x" : "d";
    p.shape = {4096};
    p.expert = expert;
    model.params.push_back(p);
  }
  const plan::Plan plan = testing::ExpertPlan(model, 4, 1, 2, 4096);
  testing::Cluster cluster;
  cluster.workloads = testing::ExpertWorkloads(model, 4, 2, 8);
  cluster.Create(model, plan, job::OptimizerSpec());
  for (const absl::Status& s : cluster.create_status) ASSERT_TRUE(s.ok()) << s;
  for (const StepResult& r : cluster.Step()) {
    ASSERT_TRUE(r.status.ok()) << r.status;
    // (G - 1) x window, out and in, per collective: 3 x 1024 + 1 x 2048.
    EXPECT_EQ(r.telemetry.elements_sent, 2 * (3 * 1024 + 1 * 2048));
    EXPECT_EQ(r.telemetry.bytes_sent, (3 * 1024 + 1 * 2048) * (2 + 2));
  }
}

}  // namespace
}  // namespace zshard::engine
