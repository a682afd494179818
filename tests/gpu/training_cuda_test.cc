// The training path end to end on a GPU: a coordinator and W zshard-worker
// processes (worker i with --device cuda:i) run the synthetic workload with
// weight decay and clipping and dump their fp32 masters, which must equal
// bit for bit those of the same job run with --device cpu (W = 1; W = 2
// where two devices exist). Skipped without a CUDA device.
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/worker/cuda/cuda_util.h"
#include "client/worker/engine/master_dump.h"
#include "common/job/job_spec.h"
#include "gtest/gtest.h"
#include "tests/integration/process_cluster.h"
#include "tests/testing/log_scan.h"

namespace zshard::testing {
namespace {

using nlohmann::json;

constexpr int64_t kExitTimeoutMs = 120000;

json JobJson(int world) {
  json params = json::array();
  const int64_t sizes[] = {1000, 300, 2500, 7, 130, 700, 50001};
  for (int i = 0; i < 7; ++i) {
    json p = {{"name", absl::StrCat("p", i)},
              {"shape", {sizes[i]}},
              {"dtype", i == 6 ? "fp32" : "bf16"}};
    if (i == 3) p["no_weight_decay"] = true;
    params.push_back(p);
  }
  return {{"name", "train"},
          {"model", {{"params", params}}},
          {"layout", {{"bucket_size", 6000}}},
          {"optimizer",
           {{"lr", 1e-3}, {"weight_decay", 0.1}, {"clip_grad_norm", 0.05}}},
          {"world", {{"instances", 1}, {"min", world}, {"max", world}}},
          {"lease_timeout_ms", 10000},
          {"heartbeat_interval_ms", 100},
          {"workload",
           {{"kind", "synthetic"},
            {"steps", 4},
            {"global_batch", 16},
            {"step_delay_ms", 0}}}};
}

// Runs the job with worker i on `devices[i]`; returns the loaded masters.
std::map<std::string, std::vector<float>> RunJob(
    const std::vector<std::string>& devices) {
  ProcessCluster cluster;
  TestJob job;
  job.spec = JobJson(static_cast<int>(devices.size()));
  const absl::Status started = cluster.StartCoordinator(job);
  EXPECT_TRUE(started.ok()) << started;
  if (!started.ok()) return {};
  const std::string dump = cluster.dir().File("masters");
  for (size_t i = 0; i < devices.size(); ++i) {
    auto worker = cluster.StartWorker(
        absl::StrCat("w", i), {"--device", devices[i], "--dump-master", dump});
    EXPECT_TRUE(worker.ok()) << worker.status();
    if (!worker.ok()) return {};
  }
  for (size_t i = 0; i < devices.size(); ++i) {
    const std::string name = absl::StrCat("w", i);
    EXPECT_EQ(cluster.worker(name)->Wait(kExitTimeoutMs).value_or(-1), 0)
        << ReadLog(cluster.WorkerLog(name));
  }
  absl::StatusOr<job::JobSpec> spec = job::ParseJobSpec(job.spec->dump());
  EXPECT_TRUE(spec.ok()) << spec.status();
  if (!spec.ok()) return {};
  auto masters = engine::LoadMasters(dump, spec->model);
  EXPECT_TRUE(masters.ok()) << masters.status();
  return masters.ok() ? *std::move(masters)
                      : std::map<std::string, std::vector<float>>();
}

void ExpectBitIdentical(const std::map<std::string, std::vector<float>>& got,
                        const std::map<std::string, std::vector<float>>& want) {
  ASSERT_EQ(got.size(), want.size());
  ASSERT_FALSE(want.empty());
  for (const auto& [name, values] : want) {
    const auto it = got.find(name);
    ASSERT_NE(it, got.end()) << name;
    ASSERT_EQ(it->second.size(), values.size()) << name;
    EXPECT_EQ(std::memcmp(it->second.data(), values.data(),
                          values.size() * sizeof(float)),
              0)
        << "param " << name;
  }
}

TEST(TrainingCudaTest, OneRankOnCudaEqualsTheCpuRun) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no cuda device";
  const auto want = RunJob({"cpu"});
  const auto got = RunJob({"cuda:0"});
  ExpectBitIdentical(got, want);
}

TEST(TrainingCudaTest, TwoRanksOnTwoDevicesEqualTheCpuRun) {
  if (cuda::DeviceCount() < 2) GTEST_SKIP() << "needs two cuda devices";
  const auto want = RunJob({"cpu", "cpu"});
  const auto got = RunJob({"cuda:0", "cuda:1"});
  ExpectBitIdentical(got, want);
}

}  // namespace
}  // namespace zshard::testing
