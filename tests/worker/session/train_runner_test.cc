// TrainRunner on a one-rank world (no peers, no rendezvous): it builds
// its first epoch when committed and steps only once the epoch is stable,
// to the job's end with a master dump; it refuses a plan hash it cannot
// reproduce; it re-shards into a new epoch (state kept through the
// StateMover, engine rebuilt from state) and ends with the same masters as
// an undisturbed run; it writes and reports checkpoints, and a restore from
// one ends with the same masters too.

#include "client/worker/train/train_runner.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/worker/checkpoint/checkpoint_file.h"
#include "client/worker/engine/master_dump.h"
#include "client/worker/train/epoch_builder.h"
#include "gtest/gtest.h"
#include "tests/testing/wait_for.h"

namespace zshard::worker {
namespace {

using ::zshard::testing::WaitFor;

constexpr int64_t kTimeoutMs = 10000;

job::JobSpec SyntheticJob(int64_t steps, int64_t step_delay_ms = 0) {
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
  job.workload.step_delay_ms = step_delay_ms;
  return job;
}

EpochInfo OneRankEpoch(const job::JobSpec& job, int64_t epoch,
                       int64_t base_epoch) {
  absl::StatusOr<plan::Plan> plan =
      plan::MakePlan(job.model, job::JobPlanOptions(job, 1));
  EpochInfo info;
  info.epoch = epoch;
  info.base_epoch = base_epoch;
  info.rank = 0;
  info.instance = 0;
  info.shard_rank = 0;
  info.world = 1;
  info.instances = 1;
  info.worker_id = "w0";
  info.plan_hash = plan.ok() ? plan->hash : "";
  return info;
}

// Epoch 1 of one rank, every range read from `file` in checkpoint `dir`
// of step `step`.
EpochInfo RestoreEpoch(const job::JobSpec& job, const std::string& dir,
                       const checkpoint::RankFileInfo& file, int64_t step) {
  EpochInfo restore = OneRankEpoch(job, 1, 0);
  restore.restore = true;
  restore.restore_dir = dir;
  restore.resume_step = step;
  restore.resume_adam_step = step;
  restore.checkpoint_files = {file.path};
  for (const plan::CheckpointFragment& range : file.ranges) {
    plan::Move move;
    move.source = plan::MoveSource::kCheckpoint;
    move.fragment = 0;
    move.dest_rank = 0;
    move.dest_member = "w0";
    move.param_index = range.param_index;
    move.expert_rank = range.expert_rank;
    move.begin = range.begin;
    move.end = range.end;
    restore.moves.push_back(move);
  }
  return restore;
}

std::string FreshDir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/train_runner_" + name;
  std::filesystem::remove_all(dir);
  return dir;
}

class TrainRunnerTest : public ::testing::Test {
 protected:
  std::unique_ptr<TrainRunner> Make(const job::JobSpec& job,
                                    const TrainRunner::Options& options) {
    Runner::Callbacks callbacks;
    callbacks.ready = [this](int64_t epoch) {
      absl::MutexLock lock(&mu_);
      ready_.push_back(epoch);
    };
    callbacks.report_checkpoint =
        [this](int64_t epoch, int64_t step, int64_t adam_step,
               const std::string& dir, const checkpoint::RankFileInfo& file) {
          absl::MutexLock lock(&mu_);
          EXPECT_EQ(epoch, 1);
          EXPECT_EQ(adam_step, step);
          checkpoints_[step] = {dir, file};
          return absl::OkStatus();
        };
    callbacks.report_failure = [this](const RunnerFailure& failure) {
      absl::MutexLock lock(&mu_);
      failures_.push_back(failure);
    };
    auto workload = std::make_unique<TrainRunner>(
        options, job,
        [](int64_t) -> std::unique_ptr<comm::KvStore> { return nullptr; },
        [this](int64_t epoch, const engine::StepTelemetry& t) {
          absl::MutexLock lock(&mu_);
          steps_.push_back({epoch, t.step});
        },
        std::move(callbacks));
    return workload;
  }
  bool Ready(int64_t epoch) {
    absl::MutexLock lock(&mu_);
    return std::find(ready_.begin(), ready_.end(), epoch) != ready_.end();
  }
  // Commits `epoch` and waits until it is ready; then makes it stable.
  void Start(TrainRunner& workload, const EpochInfo& epoch) {
    ASSERT_EQ(workload.OnEpochCommitted(epoch), EpochStart::kPending);
    ASSERT_TRUE(WaitFor([&] { return Ready(epoch.epoch); }, kTimeoutMs, 1))
        << workload.failure();
    EXPECT_FALSE(workload.active());
    workload.OnEpochStable(epoch.epoch);
  }
  std::vector<std::pair<int64_t, int64_t>> steps() {
    absl::MutexLock lock(&mu_);
    return steps_;
  }
  // Runs `job` undisturbed and returns its dump directory.
  std::string Undisturbed(const job::JobSpec& job, const std::string& name) {
    TrainRunner::Options options;
    options.dump_master_dir = FreshDir(name);
    options.engine.adam_threads = 1;
    auto workload = Make(job, options);
    Start(*workload, OneRankEpoch(job, 1, 0));
    EXPECT_TRUE(WaitFor([&] { return workload->done(); }, kTimeoutMs, 1));
    return options.dump_master_dir;
  }
  void ExpectSameMasters(const job::JobSpec& job, const std::string& a,
                         const std::string& b) {
    auto ma = engine::LoadMasters(a, job.model);
    auto mb = engine::LoadMasters(b, job.model);
    ASSERT_TRUE(ma.ok()) << ma.status();
    ASSERT_TRUE(mb.ok()) << mb.status();
    EXPECT_EQ(*ma, *mb);
  }

  absl::Mutex mu_;
  std::vector<std::pair<int64_t, int64_t>> steps_ ABSL_GUARDED_BY(mu_);
  std::vector<int64_t> ready_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, std::pair<std::string, checkpoint::RankFileInfo>>
      checkpoints_ ABSL_GUARDED_BY(mu_);
  std::vector<RunnerFailure> failures_ ABSL_GUARDED_BY(mu_);
};

TEST_F(TrainRunnerTest, StepsOnceStableToTheEndAndDumpsMasters) {
  const job::JobSpec job = SyntheticJob(5);
  TrainRunner::Options options;
  options.dump_master_dir = FreshDir("masters");
  options.engine.adam_threads = 1;
  auto workload = Make(job, options);
  Start(*workload, OneRankEpoch(job, 1, 0));
  ASSERT_TRUE(WaitFor([&] { return workload->done(); }, kTimeoutMs, 1));
  EXPECT_TRUE(workload->failure().ok()) << workload->failure();
  EXPECT_EQ(workload->step(), 5);
  EXPECT_EQ(workload->base_epoch(), 1);
  EXPECT_EQ(steps(), (std::vector<std::pair<int64_t, int64_t>>{
                         {1, 1}, {1, 2}, {1, 3}, {1, 4}, {1, 5}}));
  EXPECT_TRUE(
      std::filesystem::exists(options.dump_master_dir + "/index-0.json"));
}

TEST_F(TrainRunnerTest, PlanHashMismatchFails) {
  const job::JobSpec job = SyntheticJob(5);
  auto workload = Make(job, {});
  EpochInfo epoch = OneRankEpoch(job, 1, 0);
  epoch.plan_hash = "not-the-hash";
  EXPECT_EQ(workload->OnEpochCommitted(epoch), EpochStart::kPending);
  ASSERT_TRUE(
      WaitFor([&] { return !workload->failure().ok(); }, kTimeoutMs, 1));
  EXPECT_TRUE(
      absl::StrContains(workload->failure().message(), "plan hash mismatch"))
      << workload->failure();
  EXPECT_FALSE(Ready(1));
  EXPECT_EQ(workload->step(), 0);
}

TEST_F(TrainRunnerTest, NoRankAndNothingToSendIsReadyAtOnce) {
  const job::JobSpec job = SyntheticJob(5);
  auto workload = Make(job, {});
  EpochInfo epoch = OneRankEpoch(job, 1, 0);
  epoch.rank = -1;
  EXPECT_EQ(workload->OnEpochCommitted(epoch), EpochStart::kReady);
  EXPECT_EQ(workload->Pause(), 0);
}

TEST_F(TrainRunnerTest, ReshardedRunEndsWithTheUndisturbedMasters) {
  const job::JobSpec job = SyntheticJob(8, /*step_delay_ms=*/20);
  const std::string reference = Undisturbed(job, "reference");
  {
    absl::MutexLock lock(&mu_);
    steps_.clear();
  }

  TrainRunner::Options options;
  options.dump_master_dir = FreshDir("resharded");
  options.engine.adam_threads = 1;
  auto workload = Make(job, options);
  Start(*workload, OneRankEpoch(job, 1, 0));
  ASSERT_TRUE(WaitFor([&] { return workload->step() >= 2; }, kTimeoutMs, 1));
  // Epoch 2 is proposed: the rank stops at a step boundary.
  const int64_t stopped = workload->Pause();
  workload->OnProposed(2, 1);
  const PreparedState prepared = workload->prepared_state();
  EXPECT_EQ(prepared.step, stopped);
  EXPECT_EQ(prepared.adam_step, stopped);
  EXPECT_FALSE(prepared.commit_pending);
  ASSERT_LT(stopped, 8) << "the run ended before the transition";
  EXPECT_FALSE(WaitFor([&] { return workload->step() != stopped; }, 30, 1));

  EpochInfo next = OneRankEpoch(job, 2, 1);
  next.resume_step = stopped;
  next.resume_adam_step = prepared.adam_step;
  Start(*workload, next);
  EXPECT_TRUE(
      WaitFor([&] { return workload->base_epoch() == 2; }, kTimeoutMs, 1));
  ASSERT_TRUE(WaitFor([&] { return workload->done(); }, kTimeoutMs, 1))
      << workload->failure();
  EXPECT_TRUE(workload->failure().ok()) << workload->failure();
  EXPECT_EQ(workload->step(), 8);
  // Steps after the transition are reported under the new epoch.
  for (const auto& [epoch, step] : steps()) {
    EXPECT_EQ(epoch, step <= stopped ? 1 : 2) << "step " << step;
  }
  ExpectSameMasters(job, reference, options.dump_master_dir);
}

TEST_F(TrainRunnerTest, BrokenNextEpochIsDroppedAndTheBaseKept) {
  const job::JobSpec job = SyntheticJob(0, /*step_delay_ms=*/5);
  auto workload = Make(job, {});
  Start(*workload, OneRankEpoch(job, 1, 0));
  ASSERT_TRUE(WaitFor([&] { return workload->step() >= 1; }, kTimeoutMs, 1));
  const int64_t stopped = workload->Pause();
  workload->OnProposed(2, 1);
  EpochInfo next = OneRankEpoch(job, 2, 1);
  next.resume_step = stopped;
  next.resume_adam_step = stopped;
  ASSERT_EQ(workload->OnEpochCommitted(next), EpochStart::kPending);
  ASSERT_TRUE(WaitFor([&] { return Ready(2); }, kTimeoutMs, 1));
  // Epoch 2 broke before it was stable: epoch 3 builds on epoch 1 again.
  workload->Pause();
  workload->OnProposed(3, 1);
  EXPECT_EQ(workload->base_epoch(), 1);
  EXPECT_EQ(workload->prepared_state().step, stopped);
  // The proposal is abandoned: the base engine steps on.
  workload->Activate(stopped);
  EXPECT_TRUE(
      WaitFor([&] { return workload->step() > stopped; }, kTimeoutMs, 1));
}

TEST_F(TrainRunnerTest, CheckpointsAreWrittenReportedAndRestorable) {
  job::JobSpec job = SyntheticJob(8);
  job.checkpoint.dir = FreshDir("checkpoints");
  job.checkpoint.every_steps = 3;
  const std::string reference = Undisturbed(job, "checkpoint_reference");
  std::pair<std::string, checkpoint::RankFileInfo> at6;
  {
    absl::MutexLock lock(&mu_);
    EXPECT_EQ(checkpoints_.size(), 2u);  // steps 3 and 6
    ASSERT_EQ(checkpoints_.count(6), 1u);
    at6 = checkpoints_[6];
  }
  EXPECT_EQ(at6.first, checkpoint::StepDir(job.checkpoint.dir, 6));
  EXPECT_TRUE(std::filesystem::exists(at6.first + "/" + at6.second.path));

  // A restore: a fresh worker loads every range from the step-6 files.
  job.checkpoint.every_steps = 0;
  TrainRunner::Options options;
  options.dump_master_dir = FreshDir("restored");
  options.engine.adam_threads = 1;
  auto workload = Make(job, options);
  Start(*workload, RestoreEpoch(job, at6.first, at6.second, 6));
  ASSERT_TRUE(WaitFor([&] { return workload->done(); }, kTimeoutMs, 1))
      << workload->failure();
  // The restored run resumed after step 6.
  const auto all = steps();
  ASSERT_GE(all.size(), 2u);
  EXPECT_EQ(all[all.size() - 2], (std::pair<int64_t, int64_t>{1, 7}));
  EXPECT_EQ(all.back(), (std::pair<int64_t, int64_t>{1, 8}));
  EXPECT_EQ(workload->step(), 8);
  ExpectSameMasters(job, reference, options.dump_master_dir);

  // The same restore with the rank file gone: the runner reports the
  // checkpoint as the failed source, keeps no half state and does not fail
  // (the coordinator picks an older checkpoint).
  std::filesystem::remove(at6.first + "/" + at6.second.path);
  auto broken = Make(job, options);
  ASSERT_EQ(
      broken->OnEpochCommitted(RestoreEpoch(job, at6.first, at6.second, 6)),
      EpochStart::kPending);
  ASSERT_TRUE(WaitFor(
      [&] {
        absl::MutexLock lock(&mu_);
        return !failures_.empty();
      },
      kTimeoutMs, 1));
  {
    absl::MutexLock lock(&mu_);
    const RunnerFailure& f = failures_.front();
    EXPECT_EQ(f.kind, RunnerFailure::Kind::kPreparation);
    EXPECT_EQ(f.epoch, 1);
    EXPECT_TRUE(f.source_is_checkpoint);
    EXPECT_EQ(f.source, at6.first);
    EXPECT_TRUE(absl::StrContains(f.error, at6.second.path)) << f.error;
  }
  EXPECT_TRUE(broken->failure().ok()) << broken->failure();
}

TEST(PreparationFailureTest, OnlyARestoresDataLossNamesTheCheckpoint) {
  EpochInfo epoch;
  epoch.epoch = 4;
  epoch.restore = true;
  epoch.restore_dir = "/ckpt/step-20";
  RunnerFailure f =
      PreparationFailure(epoch, absl::DataLossError("checksum mismatch"));
  EXPECT_TRUE(f.source_is_checkpoint);
  EXPECT_EQ(f.source, "/ckpt/step-20");
  EXPECT_EQ(f.error, "checksum mismatch");
  f = PreparationFailure(epoch, absl::UnavailableError("peer lost"));
  EXPECT_FALSE(f.source_is_checkpoint);
  EXPECT_TRUE(f.source.empty());
  epoch.restore = false;
  f = PreparationFailure(epoch, absl::DataLossError("chunk checksum"));
  EXPECT_FALSE(f.source_is_checkpoint);
}

}  // namespace
}  // namespace zshard::worker
