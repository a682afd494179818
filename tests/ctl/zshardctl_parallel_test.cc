// Runs the real zshardctl binary on model-parallel jobs: plan and ledger of
// a TP=2 PP=2 job file as tables and JSON (each slot's figures equal the
// single-slot plan and ledger of that slot's model at R x C), llama2-70b
// split TP=8 PP=4 at W=1,024 (workers summarised by slot), and bad input
// (exit status 2, one line).
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/ctl/ctl_runner.h"

namespace zshard::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using json = nlohmann::json;

constexpr int kTensor = 2;
constexpr int kPipeline = 2;

// Slot (tp, pp)'s params: a column-parallel weight whose size depends on
// the slot, a tp_replicated norm, and the embedding on the first stage.
std::string SlotParams(int tp, int pp) {
  std::string params =
      R"([{"name": "w", "shape": [)" +
      std::to_string(600 + 100 * tp + 300 * pp) +
      R"(, 8]}, {"name": "ln", "shape": [8], "tp_replicated": true})";
  if (pp == 0) params += R"(, {"name": "embed", "shape": [64, 8]})";
  return params + "]";
}

// The TP=2 PP=2 job: world.max 16 (R = 4), two instances (keep_d, D = 2).
std::string JobFile() {
  std::string slots;
  for (int pp = 0; pp < kPipeline; ++pp) {
    for (int tp = 0; tp < kTensor; ++tp) {
      if (!slots.empty()) slots += ", ";
      slots += R"({"tp": )" + std::to_string(tp) + R"(, "pp": )" +
               std::to_string(pp) + R"(, "params": )" + SlotParams(tp, pp) +
               "}";
    }
  }
  return WriteSpec("tp2pp2.json", R"({"name": "tp2pp2",
      "parallel": {"tensor": 2, "pipeline": 2},
      "model": {"slots": [)" + slots + R"(]},
      "layout": {"bucket_size": 500},
      "world": {"instances": 2, "min": 4, "max": 16}})");
}

json RunJson(const std::vector<std::string>& args) {
  std::vector<std::string> full = args;
  full.push_back("--output=json");
  const CtlResult r = RunCtl(full);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, "");
  json j = json::parse(r.out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << r.out.substr(0, 200);
  return j;
}

TEST(ZshardctlParallelTest, JobFileSlotsEqualSingleSlotPlans) {
  const std::string job = JobFile();
  const json plan = RunJson({"plan", "--job", job});
  const json ledger = RunJson({"ledger", "--job", job, "--device-gib", "1"});
  EXPECT_EQ(plan["parallel"],
            (json{{"tensor", 2}, {"pipeline", 2}, {"context", 1}}));
  EXPECT_EQ(plan["world"], 16);
  EXPECT_EQ(plan["replicas"], 4);
  EXPECT_EQ(plan["data_parallel"], 4);
  EXPECT_EQ(plan["instances"], 2);
  EXPECT_EQ(plan["plan_hash"].get<std::string>().size(), 16u);
  EXPECT_EQ(ledger["data_parallel"], 4);
  // The norm is counted once per stage in the model's params.
  EXPECT_EQ(
      plan["slot_params"].get<int64_t>() - plan["model_params"].get<int64_t>(),
      2 * 8);
  ASSERT_EQ(plan["slots"].size(), 4u);
  ASSERT_EQ(ledger["slots"].size(), 4u);
  int worst = 0;
  for (int s = 0; s < 4; ++s) {
    const int tp = s % kTensor;
    const int pp = s / kTensor;
    const json& slot = plan["slots"][s];
    EXPECT_EQ(slot["tp"], tp);
    EXPECT_EQ(slot["pp"], pp);
    EXPECT_EQ(slot["data_parallel"], 4);
    // The same slot's model alone, planned over R x C = 4 ranks.
    const std::string model = WriteSpec(
        "slot" + std::to_string(s) + ".json",
        R"({"name": "tp2pp2", "params": )" + SlotParams(tp, pp) + "}");
    const std::vector<std::string> single = {
        "--model", model,           "--world", "4",           "--instances",
        "2",       "--bucket-size", "500",     "--max-world", "4"};
    std::vector<std::string> args = {"plan"};
    args.insert(args.end(), single.begin(), single.end());
    const json one = RunJson(args);
    EXPECT_EQ(slot["plan"]["plan_hash"], one["plan_hash"]) << s;
    EXPECT_EQ(slot["plan"]["buffers"], one["buffers"]) << s;
    EXPECT_EQ(slot["buckets"], one["buffers"][0]["buckets"].size()) << s;
    args[0] = "ledger";
    const json one_ledger = RunJson(args);
    EXPECT_EQ(ledger["slots"][s]["ledger"], one_ledger) << s;
    EXPECT_EQ(slot["zero1_bytes"], one_ledger["stages"]["zero1"]["total_bytes"])
        << s;
    // Each worker of the slot: its instance and shard rank are those of
    // its data-parallel rank in the single-slot plan.
    for (const json& w : plan["workers"]) {
      if (w["slot"] != s) continue;
      const json& rank = one["ranks"][w["dp_rank"].get<int>()];
      EXPECT_EQ(w["instance"], rank["instance"]);
      EXPECT_EQ(w["shard_rank"], rank["shard_rank"]);
      EXPECT_LE(w["zero1_bytes"].get<int64_t>(),
                slot["zero1_bytes"].get<int64_t>());
    }
    if (slot["zero1_bytes"] > plan["slots"][worst]["zero1_bytes"]) worst = s;
  }
  // Megatron's rank order: rank = tp + T (cp + C (replica + R pp)).
  ASSERT_EQ(plan["workers"].size(), 16u);
  ASSERT_EQ(ledger["workers"].size(), 16u);
  for (int r = 0; r < 16; ++r) {
    const json& w = plan["workers"][r];
    EXPECT_EQ(w["rank"], r);
    EXPECT_EQ(w["tp"].get<int>() +
                  kTensor * (w["cp"].get<int>() + w["replica"].get<int>() +
                             4 * w["pp"].get<int>()),
              r);
    EXPECT_EQ(w["slot"], w["tp"].get<int>() + kTensor * w["pp"].get<int>());
    EXPECT_EQ(w["dp_rank"], w["replica"]);
    EXPECT_EQ(ledger["workers"][r]["total_bytes"]["zero1"], w["zero1_bytes"]);
    EXPECT_EQ(ledger["workers"][r]["slot"], w["slot"]);
  }
  // The verdict names the worst slot and a worker in it.
  const json& fit = ledger["fit"];
  EXPECT_EQ(fit["stage"], "zero1");
  EXPECT_EQ(fit["slot"], worst);
  EXPECT_EQ(ledger["worst"]["zero1"]["slot"], worst);
  EXPECT_EQ(plan["workers"][fit["worker"].get<int>()]["slot"], worst);
  EXPECT_EQ(fit["need_bytes"], plan["slots"][worst]["zero1_bytes"]);
  EXPECT_EQ(fit["device_bytes"], int64_t{1} << 30);
  EXPECT_EQ(fit["headroom_bytes"].get<int64_t>(),
            (int64_t{1} << 30) - fit["need_bytes"].get<int64_t>());
  EXPECT_EQ(fit["fits"], true);

  // One worker: its shards, as the single-slot plan's rank.
  const json one = RunJson({"plan", "--job", job, "--rank", "13"});
  ASSERT_EQ(one["workers"].size(), 1u);
  EXPECT_EQ(one["workers"][0]["rank"], 13);
  EXPECT_EQ(one["workers"][0]["slot"], 3);  // tp 1, pp 1
  EXPECT_TRUE(one["workers"][0]["shards"].is_array());
  EXPECT_EQ(one["plan_hash"], plan["plan_hash"]);
  // A smaller world of the same job: R = 1.
  const json small =
      RunJson({"plan", "--job", job, "--world", "4", "--instances", "1"});
  EXPECT_EQ(small["replicas"], 1);
  EXPECT_EQ(small["workers"].size(), 4u);
}

TEST(ZshardctlParallelTest, JobFileTables) {
  const std::string job = JobFile();
  const CtlResult plan = RunCtl({"plan", "--job", job});
  ASSERT_EQ(plan.status, 0) << plan.err;
  EXPECT_THAT(plan.out, HasSubstr("model tp2pp2: "));
  EXPECT_THAT(plan.out, HasSubstr("parallel: tensor 2  pipeline 2  context 1  "
                                  "world 16 = 4 replicas x 4 workers"));
  EXPECT_THAT(plan.out, HasSubstr("data-parallel size R x C = 4  instances 2  "
                                  "shard group D = 2"));
  EXPECT_THAT(plan.out, HasSubstr("per slot"));
  EXPECT_THAT(plan.out, HasSubstr("owned elements"));
  EXPECT_THAT(plan.out, Not(HasSubstr("workers by slot")));
  const CtlResult one = RunCtl({"plan", "--job", job, "--rank", "13"});
  ASSERT_EQ(one.status, 0) << one.err;
  EXPECT_THAT(one.out, HasSubstr("worker 13  replica 2  tp 1  pp 1  cp 0  "
                                 "slot 3  dp_rank 2"));
  EXPECT_THAT(one.out, HasSubstr("param elements"));
  const CtlResult ledger =
      RunCtl({"ledger", "--job", job, "--device-gib", "0.000001"});
  ASSERT_EQ(ledger.status, 0) << ledger.err;
  EXPECT_THAT(ledger.out, HasSubstr("the worst worker of each stage"));
  EXPECT_THAT(ledger.out, HasSubstr("bytes per worker"));
  EXPECT_THAT(ledger.out, HasSubstr("fit: ZeRO-1's worst worker is rank "));
  EXPECT_THAT(ledger.out, HasSubstr("does not fit a "));
  // Offline with a job file even when a coordinator is named.
  const CtlResult offline =
      RunCtl({"--coordinator", "127.0.0.1:1", "ledger", "--job", job});
  ASSERT_EQ(offline.status, 0) << offline.err;
  EXPECT_THAT(offline.out, HasSubstr("give --device-gib G for a verdict"));
}

TEST(ZshardctlParallelTest, JobWithoutParallelPrintsTheSingleSlotTables) {
  const std::string job = WriteSpec("plain.json", R"({"name": "plain",
      "model": {"params": [{"name": "w", "shape": [1000, 8]}]},
      "world": {"instances": 2, "min": 2, "max": 8}})");
  const CtlResult plan = RunCtl({"plan", "--job", job});
  ASSERT_EQ(plan.status, 0) << plan.err;
  EXPECT_THAT(plan.out, HasSubstr("world 8  instances 2  shard group D 4"));
  EXPECT_THAT(plan.out, Not(HasSubstr("per slot")));
  const json ledger = RunJson({"ledger", "--job", job});
  EXPECT_EQ(ledger["params"], 8000);
  EXPECT_FALSE(ledger.contains("slots"));
}

TEST(ZshardctlParallelTest, Llama70bTp8Pp4At1024) {
  const std::vector<std::string> preset = {"--preset", "llama2-70b", "--tensor",
                                           "8",        "--pipeline", "4",
                                           "--world",  "1024"};
  std::vector<std::string> args = {"ledger"};
  args.insert(args.end(), preset.begin(), preset.end());
  const json ledger = RunJson(args);
  EXPECT_EQ(ledger["model"], "llama2-70b");
  EXPECT_EQ(ledger["replicas"], 32);
  EXPECT_EQ(ledger["data_parallel"], 32);
  ASSERT_EQ(ledger["slots"].size(), 32u);
  ASSERT_EQ(ledger["workers"].size(), 1024u);
  // The last stage (head and final norm) is the largest; tp 0 on ties.
  const json& fit = ledger["fit"];
  EXPECT_EQ(fit["tp"], 0);
  EXPECT_EQ(fit["pp"], 3);
  EXPECT_EQ(fit["slot"], 24);
  const int worker = fit["worker"].get<int>();
  EXPECT_GE(worker, 768);
  EXPECT_EQ(worker % 8, 0);
  EXPECT_EQ(fit["fits"], nullptr);
  int64_t most = 0;
  for (const json& w : ledger["workers"]) {
    most = std::max(most, w["total_bytes"]["zero1"].get<int64_t>());
  }
  EXPECT_EQ(fit["need_bytes"], most);

  args[0] = "plan";
  const json plan = RunJson(args);
  ASSERT_EQ(plan["workers"].size(), 1024u);
  ASSERT_EQ(plan["slots"].size(), 32u);
  for (int s = 0; s < 32; ++s) {
    EXPECT_EQ(plan["slots"][s]["zero1_bytes"],
              ledger["slots"][s]["ledger"]["stages"]["zero1"]["total_bytes"]);
  }

  // A table: the workers summarised by slot, not 1,024 rows.
  args.push_back("--device-gib=80");
  args[0] = "ledger";
  const CtlResult table = RunCtl(args);
  ASSERT_EQ(table.status, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("workers by slot (1024 workers"));
  EXPECT_THAT(table.out, HasSubstr("768, 776, ..., 1016"));
  EXPECT_THAT(table.out,
              HasSubstr("fit: ZeRO-1's worst worker is rank 768 in slot 24 "
                        "(tp 0, pp 3): "));
  EXPECT_THAT(table.out, HasSubstr("fits a 80.00 GiB device"));
  EXPECT_LT(std::count(table.out.begin(), table.out.end(), '\n'), 120);
  args.pop_back();
  args[0] = "plan";
  const CtlResult plan_table = RunCtl(args);
  ASSERT_EQ(plan_table.status, 0) << plan_table.err;
  EXPECT_THAT(plan_table.out, HasSubstr("workers by slot"));
  EXPECT_LT(std::count(plan_table.out.begin(), plan_table.out.end(), '\n'),
            120);
}

TEST(ZshardctlParallelTest, BadInputExitsTwoWithOneLine) {
  const std::string job = JobFile();
  const std::string model =
      WriteSpec("one.json", R"({"params": [{"name": "w", "shape": [8, 8]}]})");
  const std::string bad = WriteSpec("bad.json", "{");
  const std::vector<std::string> llama = {"--preset", "llama2-70b", "--tensor",
                                          "8",        "--pipeline", "4"};
  auto with = [&](std::vector<std::string> head,
                  const std::vector<std::string>& tail) {
    head.insert(head.end(), tail.begin(), tail.end());
    return head;
  };
  ExpectBadInput({
      {with({"plan", "--world", "1000"}, llama),
       "world (1000) is not a positive multiple of tensor x pipeline x "
       "context (32)"},
      {with({"ledger", "--world", "1000"}, llama),
       "is not a positive multiple of tensor x pipeline x context"},
      {{"ledger", "--preset", "llama2-70b", "--world", "64", "--tensor", "0"},
       "--tensor must be >= 1"},
      {{"plan", "--preset", "llama2-70b", "--world", "64", "--pipeline", "-1"},
       "--pipeline must be >= 1"},
      {{"plan", "--preset", "llama2-70b", "--world", "64", "--context", "0"},
       "--context must be >= 1"},
      {{"plan", "--preset", "llama2-70b", "--world", "64", "--tensor", "x"},
       "--tensor must be an integer"},
      {{"plan", "--preset", "llama2-70b", "--world", "3", "--tensor", "3"},
       "is not divisible by parallel.tensor (3)"},
      {{"plan", "--preset", "gpt2-small", "--world", "4", "--tensor", "2"},
       "has no model-parallel layout"},
      {{"plan", "--model", model, "--world", "4", "--tensor", "2"},
       "a model file holds one slot"},
      {with({"ledger", "--world", "64", "--max-world", "100"}, llama),
       "--max-world (100) is not a multiple of tensor x pipeline x context"},
      {with({"ledger", "--world", "64", "--instances", "3"}, llama),
       "instances (3) must divide the data-parallel size R x C (2)"},
      {{"plan", "--job", job, "--tensor", "2"},
       "--tensor comes from the job file's parallel"},
      {{"plan", "--job", job, "--world", "6"},
       "world (6) is not a positive multiple of tensor x pipeline x context "
       "(4)"},
      {{"plan", "--job", job, "--instances", "3"},
       "instances (3) must divide the data-parallel size R x C (4)"},
      {{"plan", "--job", job, "--rank", "16"},
       "worker rank 16 is out of range [0, 16)"},
      {{"plan", "--job", TempPath("missing.json")}, "does not exist"},
      {{"plan", "--job", job, "--model", model}, "give --job alone"},
      {{"ledger", "--job", bad}, "job spec is not valid json"},
      {{"ledger", "--job", job, "--device-gib", "0"},
       "--device-gib must be > 0"},
      {{"ledger", "--job", job, "--device-gib", "x"},
       "--device-gib must be a number"},
  });
}

}  // namespace
}  // namespace zshard::testing
