// Runs `zshard-bench adam` as a process and checks its JSON contract:
// params_per_s, bytes_per_s = 28 x params_per_s, the bound, flag
// errors, and --device cuda measuring or failing cleanly.
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace zshard::optim {
namespace {

struct Result {
  int exit_code;
  std::string out;
};

Result RunBench(const std::string& args) {
  const char* bin_dir = std::getenv("ZSHARD_BIN_DIR");
  const std::string cmd = std::string(bin_dir ? bin_dir : "build/bin") +
                          "/zshard-bench adam " + args + " 2>&1";
  Result r{-1, ""};
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return r;
  char buf[4096];
  size_t got;
  while ((got = fread(buf, 1, sizeof(buf), pipe)) > 0) r.out.append(buf, got);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

TEST(AdamBenchTest, PrintsJsonFigures) {
  const Result r =
      RunBench("--params 100000 --threads 2 --steps 2 --output json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  ASSERT_TRUE(j.contains("params_per_s")) << r.out;
  const double pps = j["params_per_s"].get<double>();
  EXPECT_GT(pps, 0);
  EXPECT_DOUBLE_EQ(j["bytes_per_s"].get<double>(), 28 * pps);
  EXPECT_DOUBLE_EQ(j["dram_bytes_per_s"].get<double>(), 30 * pps);
  const double bound = j["bound_params_per_s"].get<double>();
  EXPECT_GT(bound, 0);
  EXPECT_DOUBLE_EQ(j["fraction_of_bound"].get<double>(), pps / bound);
  EXPECT_EQ(j["params"].get<int64_t>(), 100000);
  EXPECT_EQ(j["threads"].get<int>(), 2);
}

TEST(AdamBenchTest, RejectsBadFlags) {
  EXPECT_EQ(RunBench("--params -5").exit_code, 2);
  EXPECT_EQ(RunBench("--device tpu").exit_code, 2);
  EXPECT_EQ(RunBench("--bogus").exit_code, 2);
  EXPECT_EQ(RunBench("--help").exit_code, 0);
}

// With a device it measures; without one it says so and exits 1.
TEST(AdamBenchTest, CudaRunsOrFailsClearly) {
  const Result r = RunBench("--device cuda --params 100000 --output json");
  if (r.exit_code == 0) {
    const nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << r.out;
    EXPECT_EQ(j["device"], "cuda");
    EXPECT_GT(j["params_per_s"].get<double>(), 0);
    EXPECT_GT(j["copy_bytes_per_s"].get<double>(), 0);
  } else {
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.out.find("cuda"), std::string::npos) << r.out;
  }
}

}  // namespace
}  // namespace zshard::optim
