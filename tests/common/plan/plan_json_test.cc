// Plan JSON rendering: the worked example in the contract of issue 2.
#include "common/plan/plan_json.h"

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace zshard::plan {
namespace {

TEST(PlanJsonTest, RendersTheContract) {
  ModelSpec model;
  for (int64_t n : {1000, 300, 5000, 7}) {
    ParamSpec p;
    p.name = "p" + std::to_string(model.params.size());
    p.shape = {n};
    model.params.push_back(p);
  }
  PlanOptions o;
  o.world = 8;
  o.instances = 2;
  o.layout.bucket_size = 4000;
  absl::StatusOr<Plan> plan = MakePlan(model, o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  std::vector<RankPlan> ranks;
  for (int r = 0; r < plan->world; ++r) {
    ranks.push_back(MakeRankPlan(model, *plan, r));
  }
  nlohmann::json j = nlohmann::json::parse(PlanToJson(model, *plan, ranks));
  EXPECT_EQ(j["plan_hash"], plan->hash);
  EXPECT_EQ(j["world"], 8);
  EXPECT_EQ(j["instances"], 2);
  EXPECT_EQ(j["shard_group_size"], 4);
  ASSERT_EQ(j["buffers"].size(), 1u);
  const nlohmann::json& b = j["buffers"][0];
  EXPECT_EQ(b["param_dtype"], "bf16");
  EXPECT_EQ(b["grad_dtype"], "bf16");
  EXPECT_EQ(b["expert"], false);
  EXPECT_EQ(b["shard_group_size"], 4);
  EXPECT_EQ(b["numel"], 6528);
  EXPECT_EQ(b["buckets"][0],
            nlohmann::json::parse(
                R"({"start": 0, "end": 5120, "numel_unpadded": 5064})"));
  EXPECT_EQ(b["params"][0], nlohmann::json::parse(
                                R"({"name": "p3", "start": 0, "end": 7,
                                    "bucket": 0})"));
  ASSERT_EQ(j["ranks"].size(), 8u);
  const nlohmann::json& r5 = j["ranks"][5];
  EXPECT_EQ(r5["rank"], 5);
  EXPECT_EQ(r5["instance"], 1);
  EXPECT_EQ(r5["shard_rank"], 1);
  ASSERT_EQ(r5["shards"].size(), 2u);
  EXPECT_EQ(r5["shards"][1], nlohmann::json::parse(R"({
      "buffer": 0, "bucket": 1, "start": 5472, "end": 5824,
      "pieces": [{"param": "p0", "start": 5472, "end": 5824,
                  "param_start": 32, "param_end": 384}]})"));
}

}  // namespace
}  // namespace zshard::plan
