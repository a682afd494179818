// Runs the real zshardctl binary: JSON output parses and matches the
// contract; every bad input ends with exit status 2, one line on stderr and
// nothing on stdout.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/ctl/ctl_runner.h"

namespace {

using ::testing::HasSubstr;
using zshard::testing::BadCase;
using zshard::testing::ExpectBadInput;
using zshard::testing::TempPath;
using zshard::testing::WriteSpec;
using Result = zshard::testing::CtlResult;

Result RunCtl(const std::vector<std::string>& args) {
  return zshard::testing::RunCtl(args);
}

const char kWorkedExample[] = R"({"name": "example", "params": [
    {"name": "p0", "shape": [1000]}, {"name": "p1", "shape": [300]},
    {"name": "p2", "shape": [5000]}, {"name": "p3", "shape": [7]}]})";

TEST(ZshardctlTest, PlanJsonMatchesTheContract) {
  const std::string spec = WriteSpec("example.json", kWorkedExample);
  Result r = RunCtl({"plan", "--model", spec, "--world", "8", "--instances",
                     "2", "--bucket-size", "4000", "--output", "json"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, "");
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_EQ(j["plan_hash"].get<std::string>().size(), 16u);
  EXPECT_EQ(j["world"], 8);
  EXPECT_EQ(j["instances"], 2);
  EXPECT_EQ(j["shard_group_size"], 4);
  EXPECT_EQ(j["buffers"][0]["numel"], 6528);
  EXPECT_EQ(j["buffers"][0]["buckets"][1]["numel_unpadded"], 1320);
  ASSERT_EQ(j["ranks"].size(), 8u);
  for (const auto& rank : j["ranks"]) {
    EXPECT_EQ(rank["shards"].size(), 2u);  // one per bucket, padding or not
  }
  const auto& piece = j["ranks"][1]["shards"][0]["pieces"][0];
  EXPECT_EQ(piece["param"], "p2");
  EXPECT_EQ(piece["param_start"], 1216);
  EXPECT_EQ(piece["param_end"], 2496);

  Result one =
      RunCtl({"plan", "--model", spec, "--world", "8", "--instances", "2",
              "--bucket-size=4000", "--rank", "5", "--output=json"});
  ASSERT_EQ(one.status, 0) << one.err;
  nlohmann::json k = nlohmann::json::parse(one.out);
  ASSERT_EQ(k["ranks"].size(), 1u);
  EXPECT_EQ(k["ranks"][0]["rank"], 5);
  EXPECT_EQ(k["plan_hash"], j["plan_hash"]);
}

TEST(ZshardctlTest, LedgerJsonMatchesTheContract) {
  Result r = RunCtl({"--coordinator", "127.0.0.1:1", "ledger", "--preset",
                     "llama2-7b", "--world", "64", "--output", "json"});
  ASSERT_EQ(r.status, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["params"], 6738415616);
  EXPECT_EQ(j["world"], 64);
  EXPECT_EQ(j["instances"], 1);
  EXPECT_EQ(j["shard_group_size"], 64);
  for (const char* stage : {"ddp", "zero1", "zero2", "zero3"}) {
    const auto& s = j["stages"][stage];
    EXPECT_EQ(s["total_bytes"], s["formula_bytes"]) << stage;
    EXPECT_EQ(s["total_bytes"].get<int64_t>(),
              s["param_bytes"].get<int64_t>() + s["grad_bytes"].get<int64_t>() +
                  s["master_bytes"].get<int64_t>() +
                  s["exp_avg_bytes"].get<int64_t>() +
                  s["exp_avg_sq_bytes"].get<int64_t>());
  }
}

TEST(ZshardctlTest, HumanTables) {
  Result ledger = RunCtl({"ledger", "--preset", "llama2-70b", "--world", "64"});
  ASSERT_EQ(ledger.status, 0) << ledger.err;
  EXPECT_THAT(ledger.out, HasSubstr("ZeRO-1"));
  EXPECT_THAT(ledger.out, HasSubstr("GiB"));
  EXPECT_THAT(ledger.out, HasSubstr("4P+12P/N"));
  Result plan =
      RunCtl({"plan", "--preset", "gpt2-small", "--world", "4", "--rank", "3"});
  ASSERT_EQ(plan.status, 0) << plan.err;
  EXPECT_THAT(plan.out, HasSubstr("transformer.wte.weight"));
  Result help = RunCtl({"--help"});
  EXPECT_EQ(help.status, 0);
  EXPECT_THAT(help.out, HasSubstr("ledger"));
}

TEST(ZshardctlTest, BadModelSpecsExitTwoWithOneLine) {
  const std::string dir = ::testing::TempDir();
  auto spec = [](const std::string& name, const std::string& text) {
    return WriteSpec(name, text);
  };
  const std::string p = R"({"params": [)";
  const std::vector<BadCase> cases = {
      {{"plan", "--model", TempPath("missing.json"), "--world", "4"},
       "does not exist"},
      {{"plan", "--model", dir, "--world", "4"}, "is a directory"},
      {{"plan", "--model", spec("bad1", "{\"params\": ["), "--world", "4"},
       "invalid json"},
      {{"plan", "--model", spec("bad2", "{}"), "--world", "4"},
       "'params' is missing"},
      {{"plan", "--model", spec("bad3", p + "]}"), "--world", "4"},
       "'params' is empty"},
      {{"ledger", "--model", spec("bad4", p + R"({"shape": [1]}]})"), "--world",
        "4"},
       "param 0 has no 'name'"},
      {{"plan", "--model", spec("bad5", p + R"({"name": "a", "shape": [1]},
                           {"name": "a", "shape": [1]}]})"),
        "--world", "4"},
       "duplicate param name 'a'"},
      {{"plan", "--model", spec("bad6", p + R"({"name": "a", "shape": []}]})"),
        "--world", "4"},
       "param 'a' field 'shape' is empty"},
      {{"plan", "--model", spec("bad7", p + R"({"name": "a", "shape": 3}]})"),
        "--world", "4"},
       "param 'a' field 'shape' is not an array"},
      {{"plan", "--model", spec("bad8", p + R"({"name": "a", "shape": [0]}]})"),
        "--world", "4"},
       "param 'a' field 'shape' dimension 0 is zero"},
      {{"plan", "--model",
        spec("bad9", p + R"({"name": "a", "shape": [-2]}]})"), "--world", "4"},
       "param 'a' field 'shape' dimension 0 is negative"},
      {{"plan", "--model",
        spec("bad10", p + R"({"name": "a", "shape": [1.5]}]})"), "--world",
        "4"},
       "param 'a' field 'shape' dimension 0 is not an integer"},
      {{"plan", "--model",
        spec("bad11",
             p + R"({"name": "a", "shape": [4294967296, 4294967296]}]})"),
        "--world", "4"},
       "param 'a' field 'shape' has more than 2^63-1 elements"},
      {{"plan", "--model",
        spec("bad12", p + R"({"name": "a", "shape": [1], "dtype": "f8"}]})"),
        "--world", "4"},
       "param 'a' field 'dtype' is unknown"},
  };
  ExpectBadInput(cases);
}

TEST(ZshardctlTest, BadOptionsExitTwoWithOneLine) {
  const std::string ok = WriteSpec("ok.json", kWorkedExample);
  const std::vector<BadCase> cases = {
      {{"plan", "--preset", "gpt7", "--world", "4"}, "unknown preset 'gpt7'"},
      {{"plan", "--model", ok, "--world", "0"}, "--world must be >= 1"},
      {{"plan", "--model", ok, "--world", "x"}, "--world must be an integer"},
      {{"plan", "--model", ok}, "--world W is required"},
      {{"plan", "--model", ok, "--world", "4", "--instances", "0"},
       "--instances must be >= 1"},
      {{"plan", "--model", ok, "--world", "6", "--instances", "4"},
       "instances (4) must divide world (6)"},
      {{"ledger", "--model", ok, "--world", "8", "--expert-parallel", "3"},
       "expert_parallel (3) must divide"},
      {{"plan", "--model", ok, "--world", "4", "--bucket-size", "0"},
       "--bucket-size must be >= 1"},
      {{"plan", "--model", ok, "--world", "4", "--rank", "4"},
       "rank 4 is out of range [0, 4)"},
      {{"plan", "--model", ok, "--world", "4", "--rank", "-1"},
       "rank -1 is out of range"},
      {{"plan", "--model", ok, "--world", "4", "--output", "xml"},
       "--output must be table or json"},
      {{"plan", "--world", "4"}, "--model FILE or --preset NAME is required"},
      {{"plan", "--model", ok, "--world", "4", "--frobnicate"},
       "unknown flag '--frobnicate'"},
      {{"frobnicate"}, "unknown command 'frobnicate'"},
      {{}, "missing command"},
      // Each command takes only its own flags.
      {{"ledger", "--model", ok, "--world", "4", "--rank", "1"},
       "unknown flag '--rank'"},
      {{"plan", "--model", ok, "--world", "4", "--world", "8"},
       "flag --world is given twice"},
      {{"--bogus", "plan"}, "unknown flag '--bogus'"},
  };
  ExpectBadInput(cases);
}

TEST(ZshardctlTest, EveryCommandHasHelp) {
  for (const char* command : {"plan", "ledger", "status", "events", "top",
                              "explain", "drain", "reshards"}) {
    Result r = RunCtl({"--coordinator", "127.0.0.1:1", command, "--help"});
    EXPECT_EQ(r.status, 0) << command << r.err;
    EXPECT_THAT(r.out, HasSubstr("usage: zshardctl")) << command;
    EXPECT_EQ(r.err, "") << command;
  }
}

}  // namespace
