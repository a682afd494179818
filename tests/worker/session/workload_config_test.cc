// Tests of reading the workload section of the job spec.

#include "client/worker/runner/workload_config.h"

#include "gtest/gtest.h"

namespace zshard::worker {
namespace {

TEST(WorkloadConfigTest, ReadsFieldsAndDefaults) {
  auto config = ParseWorkloadConfig(
      R"({"name":"demo","workload":{"kind":"idle","steps":30,"step_delay_ms":5}})");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->steps, 30);
  EXPECT_EQ(config->step_delay_ms, 5);
  config = ParseWorkloadConfig(R"({"name":"demo"})");
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->kind, "idle");
  EXPECT_EQ(config->steps, 0);
  EXPECT_EQ(config->step_delay_ms, 100);
}

TEST(WorkloadConfigTest, AcceptsTrainingKinds) {
  for (const char* kind : {"synthetic", "regression"}) {
    auto config = ParseWorkloadConfig(std::string(R"({"workload":{"kind":")") +
                                      kind + R"("}})");
    ASSERT_TRUE(config.ok()) << config.status();
    EXPECT_EQ(config->kind, kind);
  }
}

TEST(WorkloadConfigTest, RejectsBadInput) {
  for (const char* json :
       {"not json", "[1]", R"({"workload":3})",
        R"({"workload":{"kind":"synthetic-x"}})",
        R"({"workload":{"steps":-1}})", R"({"workload":{"step_delay_ms":"5"}})",
        R"({"workload":{"kind":7}})"}) {
    auto config = ParseWorkloadConfig(json);
    EXPECT_FALSE(config.ok()) << json;
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace zshard::worker
