// Checkpoints of model-parallel jobs end to end with real processes on
// 127.0.0.1 (issue 32 item 5, synthetic workload): a T = 2, P = 2 job
// writes one sub-directory per slot and a manifest listing every slot's
// files; a range lost with no live holder rolls back to the newest
// checkpoint, each slot from its own files; a checkpoint restores into
// another world and instance count, and into another tensor or pipeline
// size not at all (one line at the coordinator's start).

#include <signal.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/integration/elastic_cluster.h"
#include "tests/integration/elastic_expect.h"
#include "tests/integration/parallel_reference.h"
#include "tests/integration/parallel_runs.h"
#include "tests/testing/log_scan.h"
#include "tests/testing/subprocess.h"

namespace zshard::testing {
namespace {

// ParallelJob in one instance (keep_i), so that every range of a slot has
// exactly one holder (D = R), with checkpoints every 10 steps.
ElasticJob CheckpointedJob() {
  ElasticJob job = ParallelJob();
  job.name = "tp2pp2ckpt";
  job.instances = 1;
  job.resize = "keep_i";
  job.checkpoint_dir = "ckpt";
  job.checkpoint_every = 10;
  return job;
}

// The restored step of the newest reshard that restored one (0: none).
int64_t RestoredStep(ElasticRun& run) {
  auto history = run.probe().Reshards();
  EXPECT_TRUE(history.ok()) << history.status();
  int64_t restored = 0;
  if (!history.ok()) return restored;
  for (const v1::Reshard& r : *history) {
    if (r.restored_step() > 0) restored = r.restored_step();
  }
  return restored;
}

// After `run`'s first checkpoint, with `world` ranks past step 15: kill -9
// the worker at rank 5 (tp 1, pp 1, replica 0), the only holder of its
// half of slot (1, 1)'s state, and wait for the rollback (its event's
// reason names the slot). Returns the victim's name and the events' seq
// before the kill; an empty name after a failure.
std::pair<std::string, int64_t> KillRank5(ElasticRun& run, int world) {
  auto checkpoint = run.WaitForEvent("checkpoint", 0, kStartMs);
  EXPECT_TRUE(checkpoint.ok()) << checkpoint.status() << "\n"
                               << run.Diagnostics();
  auto before = run.WaitForRanksAtStep(world, 15, kStartMs);
  EXPECT_TRUE(before.ok()) << before.status() << "\n" << run.Diagnostics();
  if (!checkpoint.ok() || !before.ok()) return {"", 0};
  const std::string victim = HolderOf(*before, 5);
  const int64_t seq = LastSeq(run.Events());
  if (victim.empty()) return {"", seq};
  run.cluster().worker(victim)->Signal(SIGKILL);
  auto rollback = run.WaitForEvent("rollback", seq, 60000);
  EXPECT_TRUE(rollback.ok()) << rollback.status() << "\n" << run.Diagnostics();
  if (!rollback.ok()) return {"", seq};
  EXPECT_NE(rollback->reason().find("slot (tp 1, pp 1)"), std::string::npos)
      << rollback->reason();
  return {victim, seq};
}

// A finished T = 2, P = 2 job at world 8 (R = 2, I = 1) writes a checkpoint
// every 10 steps, each slot's files in its own slot-S/ dir, and its
// manifest lists them with the model-parallel sizes. A new coordinator
// restores step 20 at world 4 (R = 1), another at world 8 in two
// instances (I = 2), and each reaches the reference of 30 steps; a coordinator
// of another tensor or pipeline size refuses the checkpoint in one line naming
// both shapes, and torch export refuses it.
TEST(ModelParallelCheckpointTest, PerSlotCheckpointRestoresAtAnotherWorld) {
  ElasticJob first = CheckpointedJob();
  first.min_world = 8;
  first.steps = 20;
  ElasticRun a(first);
  ASSERT_TRUE(a.Start().ok()) << a.CoordinatorLog();
  ASSERT_TRUE(a.StartWorkers(WorkerNames(8)).ok());
  ExpectExitedZero(a, WorkerNames(8));
  const std::string dir = FinishedCheckpoint(a, 20);
  auto listed = a.probe().Checkpoints();
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 2u);
  const v1::CheckpointManifest& m = listed->back();
  EXPECT_EQ(m.step(), 20);
  EXPECT_EQ(m.tensor(), 2);
  EXPECT_EQ(m.pipeline(), 2);
  EXPECT_EQ(m.context(), 1);
  EXPECT_EQ(m.world(), 8);
  ASSERT_EQ(m.slot_params_size(), 4);
  auto counts = a.probe().CheckpointList();
  ASSERT_TRUE(counts.ok()) << counts.status();
  ASSERT_EQ(counts->file_count_size(), 2);
  EXPECT_EQ(counts->file_count(1), 8);
  // manifest.json: D = 2 files per slot, in slot order, each in its slot's
  // dir (proto JSON leaves out fields at 0).
  const nlohmann::json manifest =
      nlohmann::json::parse(ReadLog(dir + "/manifest.json"), nullptr, false);
  ASSERT_TRUE(manifest.contains("files")) << manifest.dump();
  const nlohmann::json& files = manifest["files"];
  ASSERT_EQ(files.size(), 8u) << manifest.dump();
  for (int i = 0; i < 8; ++i) {
    const nlohmann::json& f = files[static_cast<size_t>(i)];
    EXPECT_EQ(f.value("slot", 0), i / 2) << f.dump();
    EXPECT_EQ(f.value("rank", 0), i % 2) << f.dump();
    const std::string path = f.value("path", "");
    EXPECT_EQ(path, absl::StrCat("slot-", i / 2, "/rank-0000", i % 2, ".zsc"));
    EXPECT_TRUE(std::filesystem::exists(dir + "/" + path)) << path;
  }
  EXPECT_EQ(a.cluster().RunCtl({"checkpoint", "list"}), 0);
  ExpectParallelMasters(a, 8);

  // R = 1, one instance.
  ElasticJob second = RestoredJob(a.job(), 4, 30);
  ElasticRun b(second);
  ExpectRestoredRun(b, dir, 4);
  EXPECT_EQ(RestoredStep(b), 20);
  ExpectParallelMasters(b, 4);

  // R = 2 again in two instances (I 1 -> 2: each slot's D = 1).
  ElasticJob third = RestoredJob(a.job(), 8, 30);
  third.instances = 2;
  ElasticRun d(third);
  ExpectRestoredRun(d, dir, 8);
  EXPECT_EQ(RestoredStep(d), 20);
  ExpectParallelMasters(d, 8);

  // Tensor 4, pipeline 1: slots of another shape.
  ElasticJob other = second;
  other.tensor = 4;
  other.pipeline = 1;
  ElasticRun c(other);
  TestJob refused;
  refused.spec = other.ToJson();
  ASSERT_TRUE(c.cluster()
                  .StartCoordinator(refused, {"--restore", dir},
                                    /*wait=*/false)
                  .ok());
  EXPECT_EQ(c.cluster().coordinator()->Wait(20000), 2);
  const std::string err = ReadLog(c.File("coordinator-0.log"));
  EXPECT_NE(err.find("the checkpoint was written with tensor 2, pipeline 2, "
                     "context 1; this job has tensor 4, pipeline 1, context "
                     "1: restore needs the same tensor and pipeline sizes"),
            std::string::npos)
      << err;
  EXPECT_EQ(err.find('\n'), err.size() - 1) << err;

  // zshardctl checkpoint export does not take a model-parallel job.
  auto job_file = a.WriteJobFile();
  ASSERT_TRUE(job_file.ok()) << job_file.status();
  Subprocess::Options ctl;
  ctl.argv = {ProcessCluster::Bin("zshardctl"),
              "checkpoint",
              "export",
              dir,
              a.File("out.pt"),
              "--format",
              "torch",
              "--job",
              *job_file};
  ctl.stderr_path = a.File("export.err");
  auto exported = Subprocess::Start(ctl);
  ASSERT_TRUE(exported.ok()) << exported.status();
  EXPECT_EQ((*exported)->Wait(20000), 1);
  const std::string export_err = ReadLog(a.File("export.err"));
  EXPECT_NE(export_err.find("is model-parallel (tensor 2, pipeline 2, "
                            "context 1): torch export and import of "
                            "model-parallel checkpoints are not supported"),
            std::string::npos)
      << export_err;
  EXPECT_EQ(export_err.find('\n'), export_err.size() - 1) << export_err;
}

// Eight workers and no spare: kill -9 the worker at rank 5 (tp 1, pp 1,
// replica 0), the only holder of its half of slot (1, 1)'s state. Its
// replica dissolves and the range has no live holder: the job rolls back
// to the newest checkpoint at world 4, every slot from its own files, and
// finishes at the reference.
TEST(ModelParallelCheckpointTest, LostSlotRangeRollsBackToTheCheckpoint) {
  ElasticRun run(CheckpointedJob());
  ASSERT_TRUE(run.Start().ok()) << run.CoordinatorLog();
  const std::vector<std::string> names = WorkerNames(8);
  ASSERT_TRUE(run.StartWorkers(names).ok());
  const auto [victim, seq] = KillRank5(run, 8);
  ASSERT_FALSE(victim.empty());
  ExpectExitedZero(run, Without(names, victim));
  const std::vector<v1::Event> events = run.Events();
  EXPECT_TRUE(EventsOfKind(events, "lost", seq).empty())
      << DescribeEvents(events);
  const int64_t restored = RestoredStep(run);
  EXPECT_GE(restored, 10);
  EXPECT_EQ(restored % 10, 0);
  ExpectParallelMasters(run, 8);
}

// Eight workers and a spare, world 8 throughout: the spare takes the killed
// rank 5's position, but its range has no live holder, so the job rolls
// back to the newest checkpoint at world 8 and ends with the masters of
// the same job run undisturbed, bit for bit.
TEST(ModelParallelCheckpointTest, RollbackAtTheSameWorldIsBitIdentical) {
  ElasticJob job = CheckpointedJob();
  job.min_world = 8;
  ElasticRun run(job);
  ASSERT_TRUE(run.Start().ok()) << run.CoordinatorLog();
  const std::vector<std::string> names = WorkerNames(9);
  ASSERT_TRUE(run.StartWorkers(names).ok());
  const auto [victim, seq] = KillRank5(run, 8);
  ASSERT_FALSE(victim.empty());
  ExpectExitedZero(run, Without(names, victim));
  auto after = run.Status();
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->world(), 8) << after->ShortDebugString();
  EXPECT_GE(RestoredStep(run), 10);
  ExpectParallelMasters(run, 8);
  auto spec = job.Spec();
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto killed = LoadParallelDump(run.dump_dir(), *spec);
  ASSERT_TRUE(killed.ok()) << killed.status();
  auto undisturbed = UndisturbedMasters(job, 8);
  ASSERT_TRUE(undisturbed.ok()) << undisturbed.status();
  ExpectSameMasters(*killed, *undisturbed, "the run through the rollback");
}

}  // namespace
}  // namespace zshard::testing
