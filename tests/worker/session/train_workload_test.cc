// TrainWorkload on a one-rank world (no peers, no rendezvous): it steps to
// the job's end and dumps its masters, streams one telemetry report per
// step, and refuses a plan hash it cannot reproduce, a membership change
// while holding optimizer state, and a resume without state.

#include "client/worker/train/train_workload.h"

#include <filesystem>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "tests/testing/wait_for.h"

namespace zshard::worker {
namespace {

constexpr int64_t kTimeoutMs = 5000;

job::JobSpec SyntheticJob(int64_t steps) {
  job::JobSpec job;
  job.name = "unit";
  for (int i = 0; i < 3; ++i) {
    plan::ParamSpec p;
    p.name = absl::StrCat("p", i);
    p.shape = {100 + 37 * i};
    p.dtype = plan::DType::kBf16;
    job.model.params.push_back(p);
  }
  job.layout.bucket_size = 128;
  job.world.instances = 1;
  job.world.min = 1;
  job.world.max = 1;
  job.workload.kind = job::WorkloadKind::kSynthetic;
  job.workload.steps = steps;
  job.workload.global_batch = 4;
  job.workload.step_delay_ms = 0;
  return job;
}

EpochInfo OneRankEpoch(const job::JobSpec& job, int64_t epoch) {
  absl::StatusOr<plan::Plan> plan =
      plan::MakePlan(job.model, job::JobPlanOptions(job, 1));
  EpochInfo info;
  info.epoch = epoch;
  info.rank = 0;
  info.world = 1;
  info.instances = 1;
  info.plan_hash = plan.ok() ? plan->hash : "";
  return info;
}

class TrainWorkloadTest : public ::testing::Test {
 protected:
  std::unique_ptr<TrainWorkload> Make(const job::JobSpec& job,
                                      const TrainWorkload::Options& options) {
    return std::make_unique<TrainWorkload>(
        options, job,
        [](int64_t) -> std::unique_ptr<comm::KvStore> { return nullptr; },
        [this](int64_t epoch, const engine::StepTelemetry& t) {
          absl::MutexLock lock(&mu_);
          EXPECT_EQ(epoch, 1);
          steps_.push_back(t.step);
        });
  }
  std::vector<int64_t> steps() {
    absl::MutexLock lock(&mu_);
    return steps_;
  }

  absl::Mutex mu_;
  std::vector<int64_t> steps_ ABSL_GUARDED_BY(mu_);
};

TEST_F(TrainWorkloadTest, StepsToTheEndAndDumpsMasters) {
  const job::JobSpec job = SyntheticJob(5);
  TrainWorkload::Options options;
  options.dump_master_dir = ::testing::TempDir() + "/train_workload_masters";
  std::filesystem::remove_all(options.dump_master_dir);
  options.engine.adam_threads = 1;
  auto workload = Make(job, options);
  workload->OnEpochCommitted(OneRankEpoch(job, 1));
  workload->Activate(0);
  ASSERT_TRUE(
      testing::WaitFor([&] { return workload->done(); }, kTimeoutMs, 1));
  EXPECT_TRUE(workload->failure().ok()) << workload->failure();
  EXPECT_EQ(workload->step(), 5);
  EXPECT_EQ(steps(), (std::vector<int64_t>{1, 2, 3, 4, 5}));
  EXPECT_TRUE(
      std::filesystem::exists(options.dump_master_dir + "/index-0.json"));
}

TEST_F(TrainWorkloadTest, PlanHashMismatchFails) {
  const job::JobSpec job = SyntheticJob(5);
  auto workload = Make(job, {});
  EpochInfo epoch = OneRankEpoch(job, 1);
  epoch.plan_hash = "not-the-hash";
  workload->OnEpochCommitted(epoch);
  workload->Activate(0);
  ASSERT_TRUE(testing::WaitFor([&] { return !workload->failure().ok(); },
                               kTimeoutMs, 1));
  EXPECT_TRUE(
      absl::StrContains(workload->failure().message(), "plan hash mismatch"))
      << workload->failure();
  EXPECT_FALSE(workload->done());
  EXPECT_EQ(workload->step(), 0);
}

TEST_F(TrainWorkloadTest, NewEpochWhileHoldingStateFails) {
  const job::JobSpec job = SyntheticJob(0);  // runs until stopped
  auto workload = Make(job, {});
  workload->OnEpochCommitted(OneRankEpoch(job, 1));
  workload->Activate(0);
  ASSERT_TRUE(
      testing::WaitFor([&] { return workload->step() >= 2; }, kTimeoutMs, 1));
  const int64_t step = workload->Pause();
  workload->OnEpochCommitted(OneRankEpoch(job, 2));
  workload->Activate(step);
  EXPECT_TRUE(
      absl::StrContains(workload->failure().message(),
                        "re-sharding of optimizer state is not supported yet"))
      << workload->failure();
  EXPECT_EQ(workload->Pause(), step);  // no step after the failure
}

TEST_F(TrainWorkloadTest, ResumingWithoutStateFails) {
  const job::JobSpec job = SyntheticJob(10);
  auto workload = Make(job, {});
  EpochInfo epoch = OneRankEpoch(job, 3);
  epoch.resume_step = 4;
  workload->OnEpochCommitted(epoch);
  workload->Activate(4);
  ASSERT_TRUE(testing::WaitFor([&] { return !workload->failure().ok(); },
                               kTimeoutMs, 1));
  EXPECT_TRUE(
      absl::StrContains(workload->failure().message(),
                        "re-sharding of optimizer state is not supported yet"));
}

}  // namespace
}  // namespace zshard::worker
