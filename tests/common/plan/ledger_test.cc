// Ledger: exact figures equal the seed formulas to the byte on padding-free
// layouts; padding, fp32 masters and expert groups counted exactly.
#include "common/plan/ledger.h"

#include "common/plan/presets.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace zshard::plan {
namespace {

Ledger MustLedger(const ModelSpec& model, int world, int instances,
                  int64_t bucket_size = 0) {
  PlanOptions o;
  o.world = world;
  o.instances = instances;
  o.layout.bucket_size = bucket_size;
  absl::StatusOr<Plan> plan = MakePlan(model, o);
  EXPECT_TRUE(plan.ok()) << plan.status();
  absl::StatusOr<Ledger> ledger = ComputeLedger(model, *plan);
  EXPECT_TRUE(ledger.ok()) << ledger.status();
  return *ledger;
}

void ExpectFormulasExact(const Ledger& ledger) {
  for (int s = 0; s < kNumStages; ++s) {
    const StageBytes& b = ledger.stages[s];
    EXPECT_EQ(b.total_bytes, b.formula_bytes)
        << StageName(static_cast<Stage>(s)) << " D=" << ledger.shard_group_size;
    EXPECT_EQ(b.total_bytes, b.param_bytes + b.grad_bytes + b.master_bytes +
                                 b.exp_avg_bytes + b.exp_avg_sq_bytes);
  }
}

TEST(LedgerTest, PaddingFreeLayoutsEqualTheFormulasToTheByte) {
  // Every size is a multiple of lcm(D, 128) for D | 1024: no gap, no padding.
  ModelSpec model;
  const int64_t sizes[] = {1024, 3 * 1024, 65536, 7 * 1024, 1024 * 1024};
  for (int64_t n : sizes) {
    ParamSpec p;
    p.name = "w" + std::to_string(model.params.size());
    p.shape = {n / 1024, 1024};
    model.params.push_back(p);
  }
  for (int d : {1, 2, 8, 64, 1024}) {
    for (int instances : {1, 3}) {
      for (int64_t bucket : {int64_t{0}, int64_t{70000}}) {
        ExpectFormulasExact(
            MustLedger(model, d * instances, instances, bucket));
      }
    }
  }
}

TEST(LedgerTest, Llama2_7bIsPaddingFreeAtPowerOfTwoWorlds) {
  ModelSpec model = *PresetModel("llama2-7b");
  Ledger ledger = MustLedger(model, 64, 1);
  ExpectFormulasExact(ledger);
  const int64_t p = 6'738'415'616;
  EXPECT_EQ(ledger.params, p);
  EXPECT_EQ(ledger.stage(Stage::kZero1).formula_bytes, 4 * p + 12 * p / 64);
  EXPECT_EQ(ledger.stage(Stage::kZero1).master_bytes, 4 * p / 64);
  EXPECT_EQ(ledger.stage(Stage::kDdp).total_bytes, 16 * p);
}

TEST(LedgerTest, CountsPaddingExactly) {
  // The worked example: buffer of 6528 elements, P = 6307, D = 4.
  ModelSpec model;
  for (int64_t n : {1000, 300, 5000, 7}) {
    ParamSpec p;
    p.name = "p" + std::to_string(model.params.size());
    p.shape = {n};
    model.params.push_back(p);
  }
  Ledger ledger = MustLedger(model, 4, 1, 4000);
  const StageBytes& z1 = ledger.stage(Stage::kZero1);
  EXPECT_EQ(z1.param_bytes, 2 * 6528);
  EXPECT_EQ(z1.grad_bytes, 2 * 6528);
  EXPECT_EQ(z1.master_bytes, 4 * 6528 / 4);
  EXPECT_EQ(z1.total_bytes, 4 * 6528 + 12 * 6528 / 4);
  EXPECT_EQ(z1.formula_bytes, 4 * 6307 + 12 * 6307 / 4);
  EXPECT_EQ(ledger.stage(Stage::kZero3).total_bytes, 16 * 6528 / 4);
  EXPECT_EQ(ledger.stage(Stage::kZero2).grad_bytes, 2 * 6528 / 4);
}

TEST(LedgerTest, Fp32ParamsAreTheirOwnMaster) {
  ModelSpec model;
  ParamSpec p;
  p.name = "w";
  p.shape = {128};
  p.dtype = DType::kFp32;
  model.params.push_back(p);
  Ledger ledger = MustLedger(model, 2, 1);
  const StageBytes& ddp = ledger.stage(Stage::kDdp);
  EXPECT_EQ(ddp.param_bytes, 4 * 128);
  EXPECT_EQ(ddp.grad_bytes, 4 * 128);
  EXPECT_EQ(ddp.master_bytes, 0);
  EXPECT_EQ(ddp.exp_avg_bytes, 4 * 128);
  EXPECT_EQ(ledger.stage(Stage::kZero1).exp_avg_sq_bytes, 4 * 64);
}

TEST(LedgerTest, JsonContract) {
  ModelSpec model = *PresetModel("gpt2-small");
  Ledger ledger = MustLedger(model, 8, 2);
  nlohmann::json j = nlohmann::json::parse(LedgerToJson(ledger));
  EXPECT_EQ(j["params"], 124'439'808);
  EXPECT_EQ(j["world"], 8);
  EXPECT_EQ(j["instances"], 2);
  EXPECT_EQ(j["shard_group_size"], 4);
  for (const char* stage : {"ddp", "zero1", "zero2", "zero3"}) {
    for (const char* field :
         {"param_bytes", "grad_bytes", "master_bytes", "exp_avg_bytes",
          "exp_avg_sq_bytes", "total_bytes", "formula_bytes"}) {
      EXPECT_TRUE(j["stages"][stage][field].is_number_integer())
          << stage << "." << field;
    }
    EXPECT_GE(j["stages"][stage]["total_bytes"].get<int64_t>(),
              j["stages"][stage]["formula_bytes"].get<int64_t>());
  }
}

}  // namespace
}  // namespace zshard::plan
