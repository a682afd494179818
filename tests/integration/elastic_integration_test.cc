// Live re-sharding end to end with real processes on 127.0.0.1 (issue 6's
// "done when"): a spare takes over a killed rank moving only its shard, a
// joining worker grows the world, a SIGTERM'd worker hands its state over,
// a lost range without a replica rolls back to a checkpoint, and a
// checkpoint restores into another world size and instance count. Every
// run ends with the final members' dumped masters equal to the undisturbed
// reference (synthetic workload, bf16 params reduced in fp32).

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/integration/elastic_cluster.h"
#include "tests/integration/elastic_expect.h"
#include "tests/testing/log_scan.h"
#include "tests/testing/wait_for.h"

namespace zshard::testing {
namespace {

// The premise of every test below: with gradients reduced in fp32 the
// reference does not depend on the world or instance count (beyond fp32
// summation order), while with bf16 gradients it does.
TEST(ElasticReferenceTest, Fp32ReductionMakesTheReferenceWorldIndependent) {
  ElasticJob job;
  job.steps = 60;
  auto spec = job.Spec();
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto base = ReferenceMasters(*spec, 4, 2, job.steps);
  ASSERT_TRUE(base.ok()) << base.status();
  const double tol = MasterTolerance(*base, job.steps);
  const std::vector<std::pair<int, int>> topologies = {
      {2, 1}, {3, 1}, {4, 1}, {2, 2}};
  for (auto [world, instances] : topologies) {
    auto other = ReferenceMasters(*spec, world, instances, job.steps);
    ASSERT_TRUE(other.ok()) << other.status();
    EXPECT_LE(MaxDifference(*base, *other), tol / 4)
        << "W=" << world << " I=" << instances;
  }
  job::JobSpec bf16_grads = *spec;
  bf16_grads.layout.grad_reduce_in_fp32 = false;
  auto a = ReferenceMasters(bf16_grads, 4, 2, job.steps);
  auto b = ReferenceMasters(bf16_grads, 3, 1, job.steps);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_GT(MaxDifference(*a, *b), tol);
}

// I = 2, max 4, five workers: kill -9 an active rank; the spare takes its
// slot, only the lost rank's master, m and v move (from the other
// instance's replica), and training resumes within lease + 3 s.
TEST(ElasticIntegrationTest, SpareTakesOverAKilledRankMovingOnlyItsShard) {
  ElasticJob job;
  job.instances = 2;
  job.min_world = 2;
  job.max_world = 4;
  job.steps = 60;
  ElasticRun run(job);
  ASSERT_TRUE(run.Start().ok());
  const std::vector<std::string> names = WorkerNames(5);
  ASSERT_TRUE(run.StartWorkers(names).ok());
  auto before = run.WaitForRanksAtStep(4, 10, kStartMs);
  ASSERT_TRUE(before.ok()) << before.status() << "\n" << run.Diagnostics();
  const int victim_rank = 1;
  const std::string victim = HolderOf(*before, victim_rank);
  ASSERT_FALSE(victim.empty());
  const std::string spare = SpareOf(*before);
  ASSERT_FALSE(spare.empty()) << before->ShortDebugString();
  const int64_t seq = LastSeq(run.Events());
  const int64_t killed_ms = WallMs();
  run.cluster().worker(victim)->Signal(SIGKILL);

  auto stable = run.WaitForEvent("stable", seq, job.lease_timeout_ms + 30000);
  ASSERT_TRUE(stable.ok()) << stable.status() << "\n" << run.Diagnostics();
  EXPECT_LE(stable->time_ms() - killed_ms, job.lease_timeout_ms + 3000)
      << "training resumed " << stable->time_ms() - killed_ms
      << " ms after the kill";
  ExpectExitedZero(run, Without(names, victim));

  const std::vector<v1::Event> events = run.Events();
  const std::vector<v1::Event> moves = EventsOfKind(events, "moves", seq);
  ASSERT_EQ(moves.size(), 1u) << DescribeEvents(events);
  auto spec = job.Spec();
  ASSERT_TRUE(spec.ok());
  auto owned = OwnedElements(*spec, 4, victim_rank);
  ASSERT_TRUE(owned.ok()) << owned.status();
  EXPECT_EQ(BytesInReason(moves[0].reason()), 12 * *owned) << moves[0].reason();
  EXPECT_EQ(LowerBoundInReason(moves[0].reason()), 12 * *owned)
      << moves[0].reason();
  EXPECT_TRUE(EventsOfKind(events, "rollback", seq).empty())
      << DescribeEvents(events);
  EXPECT_TRUE(EventsOfKind(events, "restore", seq).empty());
  EXPECT_TRUE(LogContains(run.cluster().WorkerLog(spare),
                          absl::StrCat(" step=", job.steps, " ")))
      << run.WorkerLog(spare);
  EXPECT_FALSE(LogContains(run.cluster().WorkerLog(spare), " step=1 "))
      << run.WorkerLog(spare);
  ExpectReferenceMasters(run, 4);
}

// keep_d (the default at I = 2): W = 4 in two instances of D = 2, four
// workers and no spare; kill -9 rank 1: its instance dissolves (rank 0
// becomes a spare), the other instance holds a whole replica, so training
// goes on at W = 2 (I' = 1) with zero bytes moved and ends at the reference
// masters.
TEST(ElasticIntegrationTest, KeepDFailureWithoutSpareDropsAnInstance) {
  ElasticJob job;
  job.instances = 2;
  job.min_world = 2;
  job.max_world = 4;
  job.steps = 60;
  auto spec = job.Spec();
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_EQ(spec->world.resize, job::ResizePolicy::kKeepD);
  ElasticRun run(job);
  ASSERT_TRUE(run.Start().ok());
  const std::vector<std::string> names = WorkerNames(4);
  ASSERT_TRUE(run.StartWorkers(names).ok());
  auto before = run.WaitForRanksAtStep(4, 10, kStartMs);
  ASSERT_TRUE(before.ok()) << before.status() << "\n" << run.Diagnostics();
  ASSERT_EQ(before->instances(), 2);
  const std::string dissolved = HolderOf(*before, 0);
  const std::string victim = HolderOf(*before, 1);
  const std::vector<std::string> kept = {HolderOf(*before, 2),
                                         HolderOf(*before, 3)};
  ASSERT_FALSE(victim.empty());
  const int64_t seq = LastSeq(run.Events());
  run.cluster().worker(victim)->Signal(SIGKILL);

  auto stable = run.WaitForEvent("stable", seq, job.lease_timeout_ms + 30000);
  ASSERT_TRUE(stable.ok()) << stable.status() << "\n" << run.Diagnostics();
  ExpectExitedZero(run, Without(names, victim));

  const std::vector<v1::Event> events = run.Events();
  const std::vector<v1::Event> proposes = EventsOfKind(events, "propose", seq);
  ASSERT_EQ(proposes.size(), 1u) << DescribeEvents(events);
  EXPECT_TRUE(
      absl::StrContains(proposes[0].reason(), "world 2 = 1 instance(s) of D=2"))
      << proposes[0].reason();
  const std::vector<v1::Event> moves = EventsOfKind(events, "moves", seq);
  ASSERT_EQ(moves.size(), 1u) << DescribeEvents(events);
  EXPECT_EQ(BytesInReason(moves[0].reason()), 0) << moves[0].reason();
  EXPECT_EQ(LowerBoundInReason(moves[0].reason()), 0) << moves[0].reason();
  EXPECT_TRUE(EventsOfKind(events, "rollback", seq).empty())
      << DescribeEvents(events);
  // The whole instance ran to the end; the dissolved half waited as a
  // spare.
  for (const std::string& name : kept) {
    EXPECT_TRUE(LogContains(run.cluster().WorkerLog(name),
                            absl::StrCat(" step=", job.steps, " ")))
        << run.WorkerLog(name);
  }
  EXPECT_FALSE(LogContains(run.cluster().WorkerLog(dissolved),
                           absl::StrCat(" step=", job.steps, " ")))
      << run.WorkerLog(dissolved);
  ExpectReferenceMasters(run, 2);
}

// keep_d: after a failure without a spare dissolved an instance (W 4 -> 2,
// its survivor a spare), one joiner makes D = 2 spares: they form a whole
// new instance (W 2 -> 4, I' 1 -> 2) that receives exactly one replica's
// worth of state from the other, and training ends at the reference.
TEST(ElasticIntegrationTest, KeepDSparesFormANewInstanceWithOneReplica) {
  ElasticJob job;
  job.instances = 2;
  job.min_world = 2;
  job.max_world = 4;
  job.steps = 200;
  ElasticRun run(job);
  ASSERT_TRUE(run.Start().ok());
  const std::vector<std::string> names = WorkerNames(4);
  ASSERT_TRUE(run.StartWorkers(names).ok());
  auto before = run.WaitForRanksAtStep(4, 10, kStartMs);
  ASSERT_TRUE(before.ok()) << before.status() << "\n" << run.Diagnostics();
  const std::string dissolved = HolderOf(*before, 0);
  const std::string victim = HolderOf(*before, 1);
  ASSERT_FALSE(victim.empty());
  int64_t seq = LastSeq(run.Events());
  run.cluster().worker(victim)->Signal(SIGKILL);
  auto shrunk = run.WaitForEvent("stable", seq, job.lease_timeout_ms + 30000);
  ASSERT_TRUE(shrunk.ok()) << shrunk.status() << "\n" << run.Diagnostics();
  auto two = run.probe().Status();
  ASSERT_TRUE(two.ok()) << two.status();
  ASSERT_EQ(two->world(), 2) << two->ShortDebugString();
  ASSERT_EQ(two->instances(), 1);

  seq = LastSeq(run.Events());
  ASSERT_TRUE(run.StartWorker("w4").ok());
  auto grown = run.WaitForRanksAtStep(4, MinRankedStep(*two), kStartMs);
  ASSERT_TRUE(grown.ok()) << grown.status() << "\n" << run.Diagnostics();
  EXPECT_EQ(grown->instances(), 2);
  EXPECT_EQ(HolderOf(*grown, 2), dissolved);
  EXPECT_EQ(HolderOf(*grown, 3), "w4");
  std::vector<std::string> alive = Without(names, victim);
  alive.push_back("w4");
  ExpectExitedZero(run, alive);

  const std::vector<v1::Event> events = run.Events();
  const std::vector<v1::Event> moves = EventsOfKind(events, "moves", seq);
  ASSERT_EQ(moves.size(), 1u) << DescribeEvents(events);
  int64_t replica = 0;
  for (int64_t n : job.param_sizes) replica += 12 * n;
  EXPECT_EQ(BytesInReason(moves[0].reason()), replica) << moves[0].reason();
  EXPECT_EQ(LowerBoundInReason(moves[0].reason()), replica)
      << moves[0].reason();
  EXPECT_TRUE(EventsOfKind(events, "rollback").empty())
      << DescribeEvents(events);
  ExpectReferenceMasters(run, 4);
}

// I = 1, min 2, max 4, three workers; a fourth joins mid-run: the world
// grows to 4 by a live re-shard that moves exactly the lower bound.
TEST(ElasticIntegrationTest, JoiningWorkerGrowsTheWorldLive) {
  ElasticJob job;
  job.instances = 1;
  job.min_world = 2;
  job.max_world = 4;
  job.steps = 60;
  ElasticRun run(job);
  ASSERT_TRUE(run.Start().ok());
  ASSERT_TRUE(run.StartWorkers(WorkerNames(3)).ok());
  auto before = run.WaitForRanksAtStep(3, 10, kStartMs);
  ASSERT_TRUE(before.ok()) << before.status() << "\n" << run.Diagnostics();
  const int64_t seq = LastSeq(run.Events());
  ASSERT_TRUE(run.StartWorker("w3").ok());
  auto grown = run.WaitForRanksAtStep(4, MinRankedStep(*before), kStartMs);
  ASSERT_TRUE(grown.ok()) << grown.status() << "\n" << run.Diagnostics();
  EXPECT_GT(grown->epoch(), before->epoch());
  ExpectExitedZero(run, WorkerNames(4));
  // The newcomer resumed where the others stopped, not from step 1.
  const std::string log = run.cluster().WorkerLog("w3");
  EXPECT_FALSE(LogContains(log, " step=1 ")) << ReadLog(log);
  EXPECT_TRUE(LogContains(log, absl::StrCat(" step=", job.steps, " ")))
      << ReadLog(log);

  const std::vector<v1::Event> events = run.Events();
  const std::vector<v1::Event> moves = EventsOfKind(events, "moves", seq);
  ASSERT_EQ(moves.size(), 1u) << DescribeEvents(events);
  const std::optional<int64_t> bytes = BytesInReason(moves[0].reason());
  ASSERT_TRUE(bytes.has_value()) << moves[0].reason();
  EXPECT_GT(*bytes, 0);
  EXPECT_EQ(LowerBoundInReason(moves[0].reason()), bytes) << moves[0].reason();
  auto history = run.probe().Reshards();
  ASSERT_TRUE(history.ok()) << history.status();
  bool found = false;
  for (const v1::Reshard& r : *history) {
    if (r.world_before() == 3 && r.world_after() == 4) {
      found = true;
      EXPECT_EQ(r.outcome(), "stable");
      EXPECT_EQ(r.summary().bytes_moved(), *bytes);
      EXPECT_EQ(r.summary().lower_bound_bytes(), *bytes);
      EXPECT_EQ(r.summary().bytes_from_checkpoint(), 0);
    }
  }
  EXPECT_TRUE(found) << "no 3 -> 4 re-shard in the history";
  ExpectReferenceMasters(run, 4);
}

// I = 1, no spare: SIGTERM an active worker; it hands its ranges over,
// exits 0 and dumps nothing; no rollback or restore; the job finishes at
// world 2.
TEST(ElasticIntegrationTest, SigtermHandsTheRangesOverBeforeExiting) {
  ElasticJob job;
  job.instances = 1;
  job.min_world = 2;
  job.max_world = 3;
  job.steps = 60;
  ElasticRun run(job);
  ASSERT_TRUE(run.Start().ok());
  const std::vector<std::string> names = WorkerNames(3);
  ASSERT_TRUE(run.StartWorkers(names).ok());
  auto before = run.WaitForRanksAtStep(3, 10, kStartMs);
  ASSERT_TRUE(before.ok()) << before.status() << "\n" << run.Diagnostics();
  const std::string leaver = HolderOf(*before, 1);
  ASSERT_FALSE(leaver.empty());
  const int64_t seq = LastSeq(run.Events());
  run.cluster().worker(leaver)->Signal(SIGTERM);

  std::optional<int> code = run.cluster().worker(leaver)->Wait(kStartMs);
  EXPECT_EQ(code, 0) << run.Diagnostics();
  ExpectExitedZero(run, Without(names, leaver));
  const std::vector<v1::Event> events = run.Events();
  for (const char* kind : {"rollback", "restore", "lost", "dead"}) {
    EXPECT_TRUE(EventsOfKind(events, kind, seq).empty())
        << kind << "\n"
        << DescribeEvents(events);
  }
  const std::vector<v1::Event> moves = EventsOfKind(events, "moves", seq);
  ASSERT_EQ(moves.size(), 1u) << DescribeEvents(events);
  const std::optional<int64_t> bytes = BytesInReason(moves[0].reason());
  ASSERT_TRUE(bytes.has_value()) << moves[0].reason();
  EXPECT_GT(*bytes, 0);
  EXPECT_EQ(LowerBoundInReason(moves[0].reason()), bytes) << moves[0].reason();
  EXPECT_FALSE(LogContains(run.cluster().WorkerLog(leaver), "masters dumped"));
  auto after = run.probe().Status();
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->world(), 2);
  ExpectReferenceMasters(run, 2);
}

// I = 1, no spare, checkpoints every 10 steps: kill -9 a rank after the
// first checkpoint; its ranges have no replica, so the job rolls back to
// the newest checkpoint at world 2 and still ends with the reference.
TEST(ElasticIntegrationTest, LostRangeRollsBackToTheNewestCheckpoint) {
  ElasticRun run(RollbackJob(60));
  ASSERT_TRUE(run.Start().ok());
  const std::vector<std::string> names = WorkerNames(3);
  ASSERT_TRUE(run.StartWorkers(names).ok());
  auto checkpoint = run.WaitForEvent("checkpoint", 0, kStartMs);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status() << "\n"
                               << run.Diagnostics();
  auto before = run.WaitForRanksAtStep(3, 15, kStartMs);
  ASSERT_TRUE(before.ok()) << before.status() << "\n" << run.Diagnostics();
  const std::string victim = HolderOf(*before, 1);
  ASSERT_FALSE(victim.empty());
  const int64_t seq = LastSeq(run.Events());
  run.cluster().worker(victim)->Signal(SIGKILL);

  auto rollback = run.WaitForEvent("rollback", seq, 60000);
  ASSERT_TRUE(rollback.ok()) << rollback.status() << "\n" << run.Diagnostics();
  ExpectExitedZero(run, Without(names, victim));
  const std::vector<v1::Event> events = run.Events();
  EXPECT_TRUE(EventsOfKind(events, "lost", seq).empty())
      << DescribeEvents(events);
  auto history = run.probe().Reshards();
  ASSERT_TRUE(history.ok()) << history.status();
  int64_t restored = 0;
  for (const v1::Reshard& r : *history) {
    if (r.restored_step() > 0) restored = r.restored_step();
  }
  EXPECT_GE(restored, 10);
  EXPECT_EQ(restored % 10, 0);
  EXPECT_TRUE(
      std::filesystem::exists(run.File("ckpt/step-00000010/manifest.json")));
  ExpectReferenceMasters(run, 2);
}

// A finished job's checkpoint (world 2, I = 1, step 20) restored by a new
// coordinator at world 4, I = 2: it resumes at step 20 and reaches the
// reference masters of 30 steps.
TEST(ElasticIntegrationTest, CheckpointRestoresAtAnotherWorldAndInstances) {
  ElasticJob first;
  first.instances = 1;
  first.min_world = 2;
  first.max_world = 2;
  first.steps = 20;
  first.step_delay_ms = 10;
  first.checkpoint_dir = "ckpt";
  first.checkpoint_every = 10;
  ElasticRun a(first);
  ASSERT_TRUE(a.Start().ok());
  ASSERT_TRUE(a.StartWorkers(WorkerNames(2)).ok());
  ExpectExitedZero(a, WorkerNames(2));
  const std::string dir = FinishedCheckpoint(a, 20);
  ExpectReferenceMasters(a, 2);

  ElasticJob second = RestoredJob(a.job(), 4, 30);
  second.instances = 2;
  ElasticRun b(second);
  ExpectRestoredRun(b, dir, 4);
  ExpectReferenceMasters(b, 4, a.Schedule());
}

}  // namespace
}  // namespace zshard::testing
