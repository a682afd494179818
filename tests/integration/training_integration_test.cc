// The training path end to end with real processes on 127.0.0.1: a
// coordinator and four zshard-worker processes run the synthetic workload
// (I = 1 and 2, bf16 and fp32 params, with and without weight decay and
// clipping) and dump their fp32 masters, which must match the unsharded
// reference; the regression workload's loss goes down; a rank killed
// mid-run leaves the survivors waiting with their state (never a hang on a
// collective, never an exit) until a replacement joins and the job ends.

#include <signal.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <ostream>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/worker/engine/master_dump.h"
#include "client/worker/engine/reference_optimizer.h"
#include "client/worker/engine/workload_factory.h"
#include "common/job/job_spec.h"
#include "gtest/gtest.h"
#include "tests/integration/process_cluster.h"
#include "tests/testing/log_scan.h"
#include "tests/testing/wait_for.h"

namespace zshard::testing {
namespace {

using nlohmann::json;

constexpr int kWorld = 4;
constexpr int64_t kExitTimeoutMs = 30000;

// Six params, one without weight decay: bucket_size 600 makes three
// buckets, each padded (as in the engine's own test).
json SmallModel(const std::string& dtype) {
  json params = json::array();
  const int64_t sizes[] = {1000, 300, 2500, 7, 130, 700};
  for (int i = 0; i < 6; ++i) {
    json p = {{"name", absl::StrCat("p", i)},
              {"shape", {sizes[i]}},
              {"dtype", dtype}};
    if (i == 3) p["no_weight_decay"] = true;
    params.push_back(p);
  }
  return {{"params", params}};
}

json JobJson(const json& model, int instances, const std::string& kind,
             int64_t steps, int64_t bucket_size, const json& optimizer,
             int64_t global_batch) {
  return {
      {"name", "train"},
      {"model", model},
      {"layout", {{"bucket_size", bucket_size}}},
      {"optimizer", optimizer},
      {"world", {{"instances", instances}, {"min", kWorld}, {"max", kWorld}}},
      {"lease_timeout_ms", 3000},
      {"heartbeat_interval_ms", 100},
      {"workload",
       {{"kind", kind},
        {"steps", steps},
        {"global_batch", global_batch},
        {"step_delay_ms", 0}}}};
}

class TrainingTest : public ::testing::Test {
 protected:
  // Starts the coordinator on `spec` and kWorld workers with `flags`, then
  // waits for every worker to exit; returns their exit statuses.
  std::vector<int> RunJob(const json& spec,
                          const std::vector<std::string>& flags) {
    TestJob job;
    job.spec = spec;
    absl::Status started = cluster_.StartCoordinator(job);
    EXPECT_TRUE(started.ok()) << started;
    if (!started.ok()) return {};
    for (int i = 0; i < kWorld; ++i) {
      auto worker = cluster_.StartWorker(Name(i), flags);
      EXPECT_TRUE(worker.ok()) << worker.status();
      if (!worker.ok()) return {};
    }
    std::vector<int> codes;
    for (int i = 0; i < kWorld; ++i) {
      std::optional<int> code = cluster_.worker(Name(i))->Wait(kExitTimeoutMs);
      codes.push_back(code.value_or(-1));
    }
    return codes;
  }

  static std::string Name(int i) { return absl::StrCat("w", i); }

  ProcessCluster cluster_;
};

struct Case {
  int instances;
  const char* dtype;
  double weight_decay;
  double clip;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << "I=" << c.instances << " " << c.dtype << " wd=" << c.weight_decay
      << " clip=" << c.clip;
}

class SyntheticTrainingTest : public TrainingTest,
                              public ::testing::WithParamInterface<Case> {};

TEST_P(SyntheticTrainingTest, DumpedMastersMatchUnshardedReference) {
  const Case c = GetParam();
  constexpr int kSteps = 3;
  json optimizer = {{"lr", 1e-3},
                    {"weight_decay", c.weight_decay},
                    {"clip_grad_norm", c.clip}};
  const json spec = JobJson(SmallModel(c.dtype), c.instances, "synthetic",
                            kSteps, 600, optimizer, 16);
  const std::string dump = cluster_.dir().File("masters");
  std::vector<int> codes = RunJob(spec, {"--dump-master", dump});
  ASSERT_EQ(codes.size(), static_cast<size_t>(kWorld));
  for (int i = 0; i < kWorld; ++i) {
    EXPECT_EQ(codes[i], 0) << ReadLog(cluster_.WorkerLog(Name(i)));
  }

  absl::StatusOr<job::JobSpec> job = job::ParseJobSpec(spec.dump());
  ASSERT_TRUE(job.ok()) << job.status();
  std::vector<std::unique_ptr<engine::Workload>> workloads;
  std::vector<engine::Workload*> rank_workloads;
  for (int r = 0; r < kWorld; ++r) {
    auto w = engine::MakeWorkload(*job, kWorld, r);
    ASSERT_TRUE(w.ok()) << w.status();
    workloads.push_back(*std::move(w));
    rank_workloads.push_back(workloads.back().get());
  }
  engine::ReferenceOptimizer::Options ro;
  ro.world = kWorld;
  ro.instances = c.instances;
  ro.optimizer = job->optimizer;
  engine::ReferenceOptimizer reference(job->model, ro, *workloads[0]);
  for (int step = 1; step <= kSteps; ++step) {
    absl::StatusOr<bool> applied = reference.Step(rank_workloads);
    ASSERT_TRUE(applied.ok()) << applied.status();
    ASSERT_TRUE(*applied);
    if (c.clip > 0) {
      ASSERT_GT(reference.last_grad_norm(), c.clip);
    }
  }

  auto masters = engine::LoadMasters(dump, job->model);
  ASSERT_TRUE(masters.ok()) << masters.status();
  // The engine's own test bound: kSteps x 4 ulps of the largest master,
  // plus one ulp (only the clip coefficient's fp32 norm differs).
  float max_abs = 0;
  for (size_t p = 0; p < job->model.params.size(); ++p) {
    for (float x : reference.master(p)) {
      max_abs = std::max(max_abs, std::fabs(x));
    }
  }
  const double tol = (kSteps * 4 + 1) * std::ldexp(max_abs, -23);
  double max_diff = 0;
  for (size_t p = 0; p < job->model.params.size(); ++p) {
    const std::vector<float>& got = masters->at(job->model.params[p].name);
    const std::vector<float>& want = reference.master(p);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      max_diff = std::max(max_diff, std::fabs(double{got[i]} - want[i]));
    }
  }
  EXPECT_LE(max_diff, tol) << "max |master - reference| over every param";
  // The run really trained: p0 (elements 0.. of the concatenation) moved
  // away from its initial value 0.02 cos(0.0007 i) by about lr per step.
  double max_moved = 0;
  const std::vector<float>& p0 = masters->at("p0");
  for (size_t i = 0; i < p0.size(); ++i) {
    max_moved =
        std::max(max_moved, std::fabs(p0[i] - 0.02 * std::cos(0.0007 * i)));
  }
  EXPECT_GT(max_moved, 1e-3);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, SyntheticTrainingTest,
    ::testing::Values(Case{1, "bf16", 0.0, 0.0}, Case{1, "bf16", 0.1, 0.05},
                      Case{2, "bf16", 0.0, 0.0}, Case{2, "bf16", 0.1, 0.05},
                      Case{1, "fp32", 0.0, 0.0}, Case{1, "fp32", 0.1, 0.0},
                      Case{2, "fp32", 0.0, 0.05}, Case{2, "fp32", 0.1, 0.05}),
    [](const ::testing::TestParamInfo<Case>& info) {
      const Case& c = info.param;
      return absl::StrCat("I", c.instances, "_", c.dtype,
                          c.weight_decay > 0 ? "_wd" : "",
                          c.clip > 0 ? "_clip" : "");
    });

// The "loss" fields of a worker's "step" lines, in order.
std::vector<double> LoggedLosses(const std::string& log) {
  std::vector<double> losses;
  static const std::regex kLoss(R"(loss=([0-9.eE+-]+))");
  for (auto it = std::sregex_iterator(log.begin(), log.end(), kLoss);
       it != std::sregex_iterator(); ++it) {
    losses.push_back(std::strtod((*it)[1].str().c_str(), nullptr));
  }
  return losses;
}

TEST_F(TrainingTest, RegressionLossGoesDown) {
  const json model = RegressionMlpModel();
  const json spec =
      JobJson(model, 2, "regression", 40, 512, json{{"lr", 1e-2}}, 32);
  std::vector<int> codes = RunJob(spec, {});
  ASSERT_EQ(codes.size(), static_cast<size_t>(kWorld));
  for (int i = 0; i < kWorld; ++i) {
    const std::string log = ReadLog(cluster_.WorkerLog(Name(i)));
    EXPECT_EQ(codes[i], 0) << log;
    std::vector<double> losses = LoggedLosses(log);
    ASSERT_GE(losses.size(), 2u) << log;
    EXPECT_GT(losses.front(), 0.1) << log;
    EXPECT_LT(losses.back(), 0.5 * losses.front())
        << "first " << losses.front() << " last " << losses.back();
  }
}

// A rank killed mid-run with no spare while the job needs every rank
// (min world 4): the survivors' collectives fail, but they keep their
// optimizer state and wait (no error, no exit) while the coordinator cannot
// form a world; a replacement joining takes the dead rank over from the
// other instance's replica, and every worker then finishes the job.
TEST_F(TrainingTest, KilledPeerWaitsForAReplacementThenFinishes) {
  json spec = JobJson(SmallModel("bf16"), 2, "synthetic", 300, 600,
                      json{{"lr", 1e-3}}, 16);
  spec["workload"]["step_delay_ms"] = 5;
  TestJob job;
  job.spec = spec;
  ASSERT_TRUE(cluster_.StartCoordinator(job).ok());
  for (int i = 0; i < kWorld; ++i) {
    ASSERT_TRUE(cluster_.StartWorker(Name(i)).ok());
  }
  ASSERT_TRUE(WaitFor(
      [&] {
        for (int i = 0; i < kWorld; ++i) {
          if (!LogContains(cluster_.WorkerLog(Name(i)), " step=10 ")) {
            return false;
          }
        }
        return true;
      },
      20000))
      << ReadLog(cluster_.WorkerLog(Name(0)));
  cluster_.worker(Name(1))->Signal(SIGKILL);
  auto dead = cluster_.WaitForStatus(
      [](const json& status) {
        const json m = FindMember(status, "w1");
        return !m.is_null() && m.value("state", "") != "ACTIVE";
      },
      20000);
  ASSERT_TRUE(dead.ok()) << dead.status();
  for (int i : {0, 2, 3}) {
    const std::string log = ReadLog(cluster_.WorkerLog(Name(i)));
    EXPECT_TRUE(cluster_.worker(Name(i))->Running())
        << "worker " << Name(i) << " ended\n"
        << log;
    EXPECT_FALSE(LogContains(cluster_.WorkerLog(Name(i)), "training failed"))
        << log;
  }
  ASSERT_TRUE(cluster_.StartWorker("w4").ok());
  for (const std::string name : {"w0", "w2", "w3", "w4"}) {
    std::optional<int> code = cluster_.worker(name)->Wait(kExitTimeoutMs * 2);
    const std::string log = ReadLog(cluster_.WorkerLog(name));
    ASSERT_TRUE(code.has_value()) << "worker " << name << " hangs\n" << log;
    EXPECT_EQ(*code, 0) << log;
  }
}

}  // namespace
}  // namespace zshard::testing
