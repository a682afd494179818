// Model-parallel presets and ledgers: llama2-70b split for TP = 8, PP = 4 as
// Megatron splits it, T = P = 1 giving the preset itself, the per-slot and
// per-worker ledger and the fit verdict of the worst slot.
#include "common/plan/preset_slots.h"

#include <algorithm>
#include <string>
#include <vector>

#include "common/plan/parallel_ledger.h"
#include "common/plan/presets.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace zshard::plan {
namespace {

using ::testing::HasSubstr;

const ParamSpec* Find(const ModelSpec& m, const std::string& name) {
  for (const ParamSpec& p : m.params) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

TEST(PresetSlotsTest, Llama70bTp8Pp4IsSplitAsMegatronSplitsIt) {
  absl::StatusOr<ParallelModel> m =
      PresetParallelModel("llama2-70b", ParallelSizes{8, 4, 1});
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->slots.size(), 32u);
  ASSERT_TRUE(ValidateParallelModel(*m).ok());
  const ModelSpec& first = m->slot(3, 0);
  const ModelSpec& last = m->slot(5, 3);
  EXPECT_EQ(first.name, "llama2-70b.tp3.pp0");
  // Stage 0: the embedding (vocab 32000 padded to 32768, / 8) and layers
  // 0-19; the last stage: layers 60-79, the final norm and the head.
  EXPECT_EQ(first.params[0].name, "model.embed_tokens.weight");
  EXPECT_EQ(first.params[0].shape, (std::vector<int64_t>{4096, 8192}));
  EXPECT_NE(Find(first, "model.layers.19.mlp.up_proj.weight"), nullptr);
  EXPECT_EQ(Find(first, "model.layers.20.mlp.up_proj.weight"), nullptr);
  EXPECT_EQ(Find(first, "lm_head.weight"), nullptr);
  EXPECT_EQ(last.params.back().name, "lm_head.weight");
  EXPECT_EQ(last.params.back().shape, (std::vector<int64_t>{4096, 8192}));
  EXPECT_TRUE(Find(last, "model.norm.weight")->tp_replicated);
  EXPECT_EQ(Find(last, "model.layers.60.self_attn.q_proj.weight"),
            last.params.data());
  const std::string l = "model.layers.61.";
  const struct {
    std::string name;
    std::vector<int64_t> shape;
  } kShapes[] = {
      {l + "self_attn.q_proj.weight", {1024, 8192}},  // column: dim 0 / 8
      {l + "self_attn.k_proj.weight", {128, 8192}},
      {l + "self_attn.v_proj.weight", {128, 8192}},
      {l + "self_attn.o_proj.weight", {8192, 1024}},  // row: dim 1 / 8
      {l + "mlp.gate_proj.weight", {3584, 8192}},
      {l + "mlp.up_proj.weight", {3584, 8192}},
      {l + "mlp.down_proj.weight", {8192, 3584}},
      {l + "input_layernorm.weight", {8192}},  // replicated
  };
  for (const auto& want : kShapes) {
    const ParamSpec* p = Find(last, want.name);
    ASSERT_NE(p, nullptr) << want.name;
    EXPECT_EQ(p->shape, want.shape) << want.name;
    EXPECT_EQ(p->tp_replicated, p->shape.size() == 1) << want.name;
  }
  // Every stage holds 20 layers of 9 params; the ends add 1 and 2.
  EXPECT_EQ(first.params.size(), 181u);
  EXPECT_EQ(m->slot(0, 1).params.size(), 180u);
  EXPECT_EQ(last.params.size(), 182u);
  // Over the slots, counting replicated norms once per stage, the model is
  // the published 68,976,648,192 params plus the vocab padding of the
  // embedding and the head (768 rows of 8192 each).
  int64_t total = 0;
  for (int s = 0; s < 32; ++s) {
    for (const ParamSpec& p : m->slots[s].params) {
      if (CountsInGradNorm(p, SlotTp(m->sizes, s))) total += p.numel();
    }
  }
  EXPECT_EQ(total, int64_t{68'976'648'192} + 2 * 768 * 8192);
}

TEST(PresetSlotsTest, OneSlotIsThePresetItself) {
  for (const char* name : {"llama2-7b", "llama2-70b", "mixtral-8x7b"}) {
    absl::StatusOr<ParallelModel> m =
        PresetParallelModel(name, ParallelSizes{1, 1, 2});
    ASSERT_TRUE(m.ok()) << m.status();
    ModelSpec whole = *PresetModel(name);
    ASSERT_EQ(m->slots.size(), 1u);
    ModelSpec slot = m->slots[0];
    slot.name = whole.name;
    EXPECT_TRUE(ModelSpecToJson(slot) == ModelSpecToJson(whole)) << name;
  }
}

TEST(PresetSlotsTest, RefusesWhatCannotBeSplit) {
  absl::StatusOr<ParallelModel> gpt2 =
      PresetParallelModel("gpt2-small", ParallelSizes{2, 1, 1});
  EXPECT_EQ(gpt2.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(gpt2.status().message()),
              HasSubstr("has no model-parallel layout"));
  absl::StatusOr<ParallelModel> stages =
      PresetParallelModel("llama2-70b", ParallelSizes{8, 3, 1});
  EXPECT_THAT(std::string(stages.status().message()),
              HasSubstr("its 80 layers are not divisible by "
                        "parallel.pipeline (3)"));
  absl::StatusOr<ParallelModel> dims =
      PresetParallelModel("llama2-70b", ParallelSizes{3, 1, 1});
  EXPECT_EQ(dims.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(dims.status().message()),
              HasSubstr("is not divisible by parallel.tensor (3)"));
  EXPECT_FALSE(PresetParallelModel("nope", ParallelSizes{}).ok());
}

TEST(ParallelLedgerTest, SlotsWorkersAndTheWorstSlotsFit) {
  absl::StatusOr<ParallelModel> m =
      PresetParallelModel("llama2-70b", ParallelSizes{8, 4, 1});
  ASSERT_TRUE(m.ok()) << m.status();
  ParallelPlanOptions o;
  o.world = 256;  // R = 8
  o.instances = 2;
  absl::StatusOr<ParallelPlan> plan = MakeParallelPlan(*m, o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  absl::StatusOr<ParallelLedger> ledger = ComputeParallelLedger(*m, *plan);
  ASSERT_TRUE(ledger.ok()) << ledger.status();
  EXPECT_EQ(ledger->data_parallel, 8);
  ASSERT_EQ(ledger->slots.size(), 32u);
  for (int s = 0; s < 32; ++s) {
    absl::StatusOr<Ledger> want = ComputeLedger(m->slots[s], plan->slots[s]);
    ASSERT_TRUE(want.ok());
    EXPECT_EQ(ledger->slots[s].params, want->params);
    EXPECT_EQ(ledger->slots[s].shard_group_size, 4);
    EXPECT_EQ(ledger->slots[s].stage(Stage::kZero1).total_bytes,
              want->stage(Stage::kZero1).total_bytes);
  }
  // The last stage (the head, the final norm) is the largest: the worst
  // slot is its first tensor rank, and its worst worker is in that slot.
  const int worst = ledger->worst_slot[static_cast<int>(Stage::kZero1)];
  EXPECT_EQ(SlotPp(m->sizes, worst), 3);
  EXPECT_EQ(SlotTp(m->sizes, worst), 0);
  const int worker = ledger->worst_worker[static_cast<int>(Stage::kZero1)];
  const Position p = PositionOf(m->sizes, 256, worker);
  EXPECT_EQ(SlotIndex(m->sizes, p.tp, p.pp), worst);
  const std::vector<WorkerBytes> workers = ComputeWorkerBytes(*m, *plan);
  ASSERT_EQ(workers.size(), 256u);
  int64_t max_zero1 = 0;
  for (const WorkerBytes& w : workers) {
    max_zero1 = std::max(max_zero1,
                         w.stages[static_cast<int>(Stage::kZero1)].total_bytes);
    EXPECT_EQ(w.stages[0].total_bytes,
              ledger->slots[w.slot].stage(Stage::kDdp).total_bytes);
  }
  const int64_t need = ledger->worst(Stage::kZero1).total_bytes;
  EXPECT_EQ(max_zero1, need);
  EXPECT_EQ(workers[worker].stages[1].total_bytes, need);
  const FitVerdict fits = CheckFit(*ledger, Stage::kZero1, need);
  EXPECT_TRUE(fits.fits);
  EXPECT_EQ(fits.slot, worst);
  EXPECT_EQ(fits.worker, worker);
  EXPECT_EQ(fits.headroom_bytes, 0);
  EXPECT_FALSE(CheckFit(*ledger, Stage::kZero1, need - 1).fits);
  // About 2.2B params a worker on the last stage: in 32 GiB, DDP's 16
  // bytes a param do not fit, ZeRO-1's 4 + 12 / 4 do.
  EXPECT_FALSE(CheckFit(*ledger, Stage::kDdp, int64_t{32} << 30).fits);
  EXPECT_TRUE(CheckFit(*ledger, Stage::kZero1, int64_t{32} << 30).fits);
  const std::string json = ParallelLedgerToJson(*ledger);
  EXPECT_THAT(json, HasSubstr(R"("parallel":{"tensor":8,"pipeline":4,)"));
  EXPECT_THAT(json, HasSubstr(R"("data_parallel":8,"instances":2,)"));
}

}  // namespace
}  // namespace zshard::plan
