// Model-parallel plans: positions in Megatron's rank order, every slot's
// layout and shard ranges against the Megatron layout oracle at data-parallel
// size R x C, worker plans, the hash, and refused inputs.
#include "common/plan/parallel_plan.h"

#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/plan/megatron_layout.h"

namespace zshard::plan {
namespace {

using ::testing::HasSubstr;

ParamSpec Param(std::string name, std::vector<int64_t> shape) {
  ParamSpec p;
  p.name = std::move(name);
  p.shape = std::move(shape);
  return p;
}

// Slot models that differ from slot to slot: sizes, dtypes, experts, a
// shared embedding on the first stage, tp_replicated norms.
ParallelModel TestModel(const ParallelSizes& sizes) {
  ParallelModel m;
  m.sizes = sizes;
  m.slots.resize(sizes.slots());
  for (int pp = 0; pp < sizes.pipeline; ++pp) {
    for (int tp = 0; tp < sizes.tensor; ++tp) {
      ModelSpec& s = m.slots[SlotIndex(sizes, tp, pp)];
      const int64_t k = 1 + tp + 3 * pp;
      if (pp == 0) {
        s.params.push_back(Param("embed", {1000 + 7 * k, 16}));
        s.params.back().shared_embedding = true;
      }
      for (int layer = 0; layer < 3; ++layer) {
        const std::string p = "layers." + std::to_string(pp * 3 + layer) + ".";
        s.params.push_back(Param(p + "qkv", {48 * k + layer, 64}));
        s.params.push_back(Param(p + "out", {64, 16 * k + 3}));
        s.params.push_back(Param(p + "norm", {64}));
        s.params.back().tp_replicated = true;
        s.params.back().no_weight_decay = true;
        s.params.push_back(Param(p + "expert", {32, 8 * k + layer}));
        s.params.back().expert = true;
        s.params.push_back(Param(p + "scale", {5 + layer}));
        s.params.back().dtype = DType::kFp32;
      }
    }
  }
  return m;
}

ParallelPlanOptions Options(int world, int instances) {
  ParallelPlanOptions o;
  o.world = world;
  o.instances = instances;
  o.layout.bucket_size = 20000;  // several buckets per buffer
  return o;
}

TEST(ParallelTest, RankOrderIsMegatronsTpCpDpPp) {
  const ParallelSizes sizes{2, 2, 2};  // T, P, C
  const int world = 24;                // R = 3
  std::set<std::tuple<int, int, int, int>> seen;
  for (int rank = 0; rank < world; ++rank) {
    const Position p = PositionOf(sizes, world, rank);
    // Megatron's "tp-cp-ep-dp-pp": tp fastest, then cp, dp, pp.
    EXPECT_EQ(rank, p.tp + 2 * (p.cp + 2 * (p.replica + 3 * p.pp)));
    EXPECT_EQ(RankOf(sizes, world, p), rank);
    EXPECT_TRUE(seen.emplace(p.replica, p.tp, p.pp, p.cp).second);
    EXPECT_LT(p.replica, 3);
    EXPECT_LT(p.tp, 2);
    EXPECT_LT(p.pp, 2);
    EXPECT_LT(p.cp, 2);
    const int dp = DataParallelRank(sizes, p);
    EXPECT_EQ(dp, p.cp + 2 * p.replica);
    EXPECT_EQ(PositionOfDataParallelRank(sizes, p.tp, p.pp, dp), p);
  }
  EXPECT_EQ(seen.size(), 24u);  // a bijection onto (replica, tp, pp, cp)
  EXPECT_EQ(PositionOf(sizes, world, 1), (Position{0, 1, 0, 0}));
  EXPECT_EQ(PositionOf(sizes, world, 2), (Position{0, 0, 0, 1}));
  EXPECT_EQ(PositionOf(sizes, world, 4), (Position{1, 0, 0, 0}));
  EXPECT_EQ(PositionOf(sizes, world, 12), (Position{0, 0, 1, 0}));
  // The data-parallel group with context: same (tp, pp), in rank order.
  EXPECT_THAT(DataParallelGroup(sizes, world, 13),
              ::testing::ElementsAre(13, 15, 17, 19, 21, 23));
  EXPECT_EQ(SlotIndex(sizes, 1, 1), 3);
  EXPECT_EQ(SlotTp(sizes, 3), 1);
  EXPECT_EQ(SlotPp(sizes, 2), 1);
}

TEST(ParallelTest, TpReplicatedParamsCountOnceInTheNorm) {
  ParamSpec norm = Param("ln", {4});
  norm.tp_replicated = true;
  EXPECT_TRUE(CountsInGradNorm(norm, 0));
  EXPECT_FALSE(CountsInGradNorm(norm, 1));
  EXPECT_TRUE(CountsInGradNorm(Param("w", {4}), 1));
}

// Every slot's plan is MakePlan of its model at R x C, equal to the oracle;
// every worker's plan is its slot's rank plan at its data-parallel rank.
void CheckAgainstOracle(const ParallelSizes& sizes, int world, int instances,
                        int expert_parallel) {
  SCOPED_TRACE(::testing::Message()
               << "T=" << sizes.tensor << " P=" << sizes.pipeline << " C="
               << sizes.context << " W=" << world << " I=" << instances);
  const ParallelModel model = TestModel(sizes);
  ParallelPlanOptions o = Options(world, instances);
  o.layout.expert_parallel = expert_parallel;
  absl::StatusOr<ParallelPlan> plan = MakeParallelPlan(model, o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const int dp = world / sizes.replica_size() * sizes.context;
  EXPECT_EQ(plan->data_parallel, dp);
  EXPECT_EQ(plan->replicas, world / sizes.replica_size());
  ASSERT_EQ(plan->slots.size(), static_cast<size_t>(sizes.slots()));
  for (int s = 0; s < sizes.slots(); ++s) {
    const Plan& slot = plan->slots[s];
    EXPECT_EQ(slot.world, dp);
    EXPECT_EQ(slot.instances, instances);
    PlanOptions single;
    single.world = dp;
    single.instances = instances;
    single.layout = o.layout;
    EXPECT_EQ(slot.hash, MakePlan(model.slots[s], single)->hash);
    testing::ExpectMegatronLayout(model.slots[s], slot,
                                  "slot " + std::to_string(s));
  }
  std::vector<std::set<int>> dp_ranks(sizes.slots());
  for (int r = 0; r < world; ++r) {
    const WorkerPlan w = MakeWorkerPlan(model, *plan, r);
    EXPECT_EQ(w.position, PositionOf(sizes, world, r));
    EXPECT_EQ(w.slot, SlotIndex(sizes, w.position.tp, w.position.pp));
    EXPECT_TRUE(dp_ranks[w.slot].insert(w.dp_rank).second);
    const RankPlan want =
        MakeRankPlan(model.slots[w.slot], plan->slots[w.slot], w.dp_rank);
    EXPECT_EQ(w.shards.instance, want.instance);
    EXPECT_EQ(w.shards.shard_rank, want.shard_rank);
    ASSERT_EQ(w.shards.shards.size(), want.shards.size());
    for (size_t i = 0; i < want.shards.size(); ++i) {
      EXPECT_EQ(w.shards.shards[i].start, want.shards[i].start);
      EXPECT_EQ(w.shards.shards[i].end, want.shards[i].end);
      EXPECT_EQ(w.shards.shards[i].pieces.size(), want.shards[i].pieces.size());
    }
  }
  for (const std::set<int>& ranks : dp_ranks) {
    EXPECT_EQ(ranks.size(), static_cast<size_t>(dp));  // each dp rank once
  }
}

TEST(ParallelPlanTest, Tp2Pp2SlotsEqualTheMegatronOracle) {
  CheckAgainstOracle({2, 2, 1}, 8, 1, 1);   // R = 2, D = 2
  CheckAgainstOracle({2, 2, 1}, 16, 2, 2);  // R = 4, I = 2, E = 2
  CheckAgainstOracle({2, 2, 1}, 24, 1, 1);  // R = 6, D = 6
}

TEST(ParallelPlanTest, Tp2Pp2Cp2SlotsEqualTheMegatronOracle) {
  CheckAgainstOracle({2, 2, 2}, 24, 2, 1);  // R = 3, R x C = 6, D = 3
  CheckAgainstOracle({2, 2, 2}, 32, 1, 4);  // R = 4, D = 8, E = 4
}

TEST(ParallelPlanTest, OneSlotIsTheSingleSlotPlan) {
  const ParallelModel model = TestModel({1, 1, 1});
  absl::StatusOr<ParallelPlan> plan = MakeParallelPlan(model, Options(4, 2));
  ASSERT_TRUE(plan.ok()) << plan.status();
  PlanOptions single;
  single.world = 4;
  single.instances = 2;
  single.layout.bucket_size = 20000;
  EXPECT_EQ(plan->slots[0].hash, MakePlan(model.slots[0], single)->hash);
  testing::ExpectMegatronLayout(model.slots[0], plan->slots[0], "one slot");
}

TEST(ParallelPlanTest, HashIsDeterministicAndChangesWithEveryInput) {
  const ParallelSizes sizes{2, 2, 1};
  const ParallelModel model = TestModel(sizes);
  const ParallelPlanOptions o = Options(8, 2);
  const std::string hash = MakeParallelPlan(model, o)->hash;
  EXPECT_EQ(hash, MakeParallelPlan(model, o)->hash);
  EXPECT_EQ(hash, ParallelPlanHash(model, o));
  EXPECT_EQ(hash.size(), 16u);
  std::set<std::string> hashes = {hash};
  auto changed = [&](const ParallelModel& m, const ParallelPlanOptions& opt,
                     const char* what) {
    absl::StatusOr<ParallelPlan> p = MakeParallelPlan(m, opt);
    ASSERT_TRUE(p.ok()) << what << ": " << p.status();
    EXPECT_TRUE(hashes.insert(p->hash).second) << what;
    EXPECT_EQ(p->hash, ParallelPlanHash(m, opt)) << what;
  };
  ParallelPlanOptions w = o;
  w.world = 16;
  changed(model, w, "world");
  ParallelPlanOptions i = o;
  i.instances = 1;
  changed(model, i, "instances");
  ParallelPlanOptions b = o;
  b.layout.bucket_size += 1;
  changed(model, b, "bucket size");
  ParallelPlanOptions f = o;
  f.layout.grad_reduce_in_fp32 = true;
  changed(model, f, "grad_reduce_in_fp32");
  ParallelModel swapped = model;  // two slots exchanged
  std::swap(swapped.slots[1], swapped.slots[2]);
  changed(swapped, o, "slot order");
  ParallelModel cp = model;
  cp.sizes.context = 2;
  ParallelPlanOptions cpo = o;
  cpo.world = 16;  // R = 2, R x C = 4: the slots' own plans equal w's
  changed(cp, cpo, "context");
  for (int s = 0; s < sizes.slots(); ++s) {
    ParallelModel m = model;
    ParamSpec& p = m.slots[s].params[s % m.slots[s].params.size()];
    p.tp_replicated = !p.tp_replicated;
    changed(m, o, "tp_replicated");
    m = model;
    m.slots[s].params.back().shape.back() += 1;
    changed(m, o, "shape");
    m = model;
    m.slots[s].params[1].name += "x";
    changed(m, o, "name");
  }
}

TEST(ParallelPlanTest, RefusesBadInputsInOneLine) {
  const ParallelSizes sizes{2, 2, 1};
  const ParallelModel model = TestModel(sizes);
  struct Case {
    ParallelModel model;
    ParallelPlanOptions options;
    const char* message;
  };
  ParallelModel missing = model;
  missing.slots.pop_back();
  ParallelModel bad_slot = model;
  bad_slot.slots[3].params[0].shape = {0};
  ParallelModel zero = model;
  zero.sizes.pipeline = 0;
  ParallelPlanOptions bad_ep = Options(8, 1);
  bad_ep.layout.expert_parallel = 4;
  const Case cases[] = {
      {missing, Options(8, 1), "the model has 3 slots; tensor x pipeline is 4"},
      {bad_slot, Options(8, 1), "slot (tp 1, pp 1): model spec: param"},
      {zero, Options(8, 1), "parallel.pipeline must be >= 1"},
      {model, Options(6, 1), "world (6) is not a positive multiple of"},
      {model, Options(12, 2),
       "instances (2) must divide the data-parallel size R x C (3)"},
      {model, bad_ep, "slot (tp 0, pp 0): expert_parallel (4) must divide"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<ParallelPlan> plan = MakeParallelPlan(c.model, c.options);
    ASSERT_FALSE(plan.ok()) << c.message;
    EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(plan.status().message()), HasSubstr(c.message));
    EXPECT_EQ(std::string(plan.status().message()).find('\n'),
              std::string::npos);
  }
  absl::StatusOr<ParallelPlan> plan = MakeParallelPlan(model, Options(8, 1));
  ASSERT_TRUE(plan.ok());
  EXPECT_FALSE(CheckWorkerRank(*plan, 8).ok());
  EXPECT_TRUE(CheckWorkerRank(*plan, 7).ok());
  EXPECT_TRUE(MakeWorkerPlan(model, *plan, 8).shards.shards.empty());
}

}  // namespace
}  // namespace zshard::plan
