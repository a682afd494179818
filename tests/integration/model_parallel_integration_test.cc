// Model-parallel jobs end to end with real processes on 127.0.0.1 (issue
// 32, synthetic workload, no torch): T = 2, P = 2, R = 2 (eight workers) in
// two instances, each slot's optimizer state sharded over its own
// data-parallel domain and the commit point's grad norm over the whole
// world. A killed worker's position is taken by a spare, moving only its
// slot's shard; with no spare its replica is dissolved (keep_d: no byte
// moves) and the job finishes at one replica. Every run ends with each
// slot's dumped masters equal to the reference (one reference optimizer per
// slot, the world's norm shared).

#include <signal.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/job/job_slot.h"
#include "common/plan/parallel.h"
#include "common/status.h"
#include "gtest/gtest.h"
#include "tests/integration/elastic_cluster.h"
#include "tests/integration/elastic_expect.h"
#include "tests/integration/parallel_reference.h"
#include "tests/integration/parallel_runs.h"

namespace zshard::testing {
namespace {

// Parameter elements of slot `slot` owned by its data-parallel rank
// `dp_rank` at `world` workers.
int64_t SlotOwned(const job::JobSpec& spec, int world, int slot, int dp_rank) {
  const job::JobSpec slot_spec = job::SlotSpec(spec, slot);
  auto owned = OwnedElements(
      slot_spec, plan::DataParallelSize(spec.parallel, world), dp_rank);
  EXPECT_TRUE(owned.ok()) << owned.status();
  return owned.ok() ? *owned : -1;
}

// The premise of the tests: the slots' results depend on sharing one norm.
TEST(ModelParallelReferenceTest, TheWorldsNormChangesTheResult) {
  auto spec = ParallelJob().Spec();
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto world = ParallelReferenceMasters(*spec, 8, 20, /*world_norm=*/true);
  auto own = ParallelReferenceMasters(*spec, 8, 20, /*world_norm=*/false);
  ASSERT_TRUE(world.ok() && own.ok());
  ASSERT_EQ(world->size(), 4u);
  for (size_t s = 0; s < world->size(); ++s) {
    EXPECT_GT(MaxDifference((*world)[s], (*own)[s]),
              MasterTolerance((*world)[s], 20))
        << "slot " << s;
  }
}

// Two undisturbed runs at one world size are bit-identical (world.min 8:
// the job never forms at 4 and grows, which rounds its first steps as a
// world of 4 does).
TEST(ModelParallelIntegrationTest, TwoRunsAreBitIdentical) {
  ElasticJob job = ParallelJob();
  job.min_world = 8;
  auto a = UndisturbedMasters(job, 8);
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = UndisturbedMasters(job, 8);
  ASSERT_TRUE(b.ok()) << b.status();
  ExpectSameMasters(*b, *a, "the second run");
}

// Eight workers and a spare: kill -9 the worker at rank 5 (tp 1, replica 0,
// pp 1); the spare takes that position and only that slot's state moves
// (the whole slot from the other replica: D = 1), bytes = lower bound.
TEST(ModelParallelIntegrationTest, SpareTakesAKilledPositionMovingOnlyItsSlot) {
  ElasticJob job = ParallelJob();
  job.min_world = 8;  // world 8 from the first step (see TwoRuns...)
  ElasticRun run(job);
  ASSERT_TRUE(run.Start().ok()) << run.CoordinatorLog();
  const std::vector<std::string> names = WorkerNames(9);
  ASSERT_TRUE(run.StartWorkers(names).ok());
  auto before = run.WaitForRanksAtStep(8, 8, kStartMs);
  ASSERT_TRUE(before.ok()) << before.status() << "\n" << run.Diagnostics();
  const int victim_rank = 5;
  const std::string victim = HolderOf(*before, victim_rank);
  ASSERT_FALSE(victim.empty());
  const std::string spare = SpareOf(*before);
  ASSERT_FALSE(spare.empty()) << before->ShortDebugString();
  const int64_t seq = LastSeq(run.Events());
  run.cluster().worker(victim)->Signal(SIGKILL);

  auto stable = run.WaitForEvent("stable", seq, job.lease_timeout_ms + 30000);
  ASSERT_TRUE(stable.ok()) << stable.status() << "\n" << run.Diagnostics();
  ExpectExitedZero(run, Without(names, victim));
  auto after = run.Status();
  ASSERT_TRUE(after.ok());

  const std::vector<v1::Event> events = run.Events();
  const std::vector<v1::Event> moves = EventsOfKind(events, "moves", seq);
  ASSERT_EQ(moves.size(), 1u) << DescribeEvents(events);
  auto spec = job.Spec();
  ASSERT_TRUE(spec.ok());
  const plan::Position pos = plan::PositionOf(spec->parallel, 8, victim_rank);
  const int slot = plan::SlotIndex(spec->parallel, pos.tp, pos.pp);
  const int64_t owned =
      SlotOwned(*spec, 8, slot, plan::DataParallelRank(spec->parallel, pos));
  EXPECT_EQ(BytesInReason(moves[0].reason()), 12 * owned) << moves[0].reason();
  EXPECT_EQ(LowerBoundInReason(moves[0].reason()), 12 * owned)
      << moves[0].reason();
  ExpectParallelMasters(run, 8);
  // Bit for bit the masters of the same job run undisturbed.
  auto killed = LoadParallelDump(run.dump_dir(), *spec);
  ASSERT_TRUE(killed.ok()) << killed.status();
  auto undisturbed = UndisturbedMasters(job, 8);
  ASSERT_TRUE(undisturbed.ok()) << undisturbed.status();
  ExpectSameMasters(*killed, *undisturbed, "the run through the kill");
}

// keep_d with eight workers and no spare: kill -9 the worker at rank 2
// (replica 1): replica 1 is dissolved (its three others become spares),
// replica 0 trains on alone (R = 1, I = 1) with no byte moved, and the
// run ends at the reference.
TEST(ModelParallelIntegrationTest, KeepDWithoutSpareDissolvesTheReplica) {
  ElasticJob job = ParallelJob();
  auto spec = job.Spec();
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_EQ(spec->world.resize, job::ResizePolicy::kKeepD);
  ElasticRun run(job);
  ASSERT_TRUE(run.Start().ok()) << run.CoordinatorLog();
  const std::vector<std::string> names = WorkerNames(8);
  ASSERT_TRUE(run.StartWorkers(names).ok());
  auto before = run.WaitForRanksAtStep(8, 8, kStartMs);
  ASSERT_TRUE(before.ok()) << before.status() << "\n" << run.Diagnostics();
  const int victim_rank = 2;
  const std::string victim = HolderOf(*before, victim_rank);
  ASSERT_FALSE(victim.empty());
  // Replica 0 (ranks 0, 1, 4, 5) stays whole, in its positions.
  std::vector<std::string> kept;
  for (int r : {0, 1, 4, 5}) kept.push_back(HolderOf(*before, r));
  const int64_t seq = LastSeq(run.Events());
  run.cluster().worker(victim)->Signal(SIGKILL);

  auto stable = run.WaitForEvent("stable", seq, job.lease_timeout_ms + 30000);
  ASSERT_TRUE(stable.ok()) << stable.status() << "\n" << run.Diagnostics();
  auto after = run.Status();
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->world(), 4) << after->ShortDebugString();
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(HolderOf(*after, r), kept[static_cast<size_t>(r)])
        << after->ShortDebugString();
  }
  const std::vector<v1::Event> events = run.Events();
  const std::vector<v1::Event> moves = EventsOfKind(events, "moves", seq);
  ASSERT_EQ(moves.size(), 1u) << DescribeEvents(events);
  EXPECT_EQ(BytesInReason(moves[0].reason()), 0) << moves[0].reason();
  ExpectExitedZero(run, Without(names, victim));
  ExpectParallelMasters(run, 8);
}

// Context parallelism: T = 2, C = 2 (P = 1), eight workers = two replicas,
// each slot sharded over R x C = 4 data-parallel ranks in one instance (so
// every rank owns a quarter of its slot); every slot's masters equal the
// reference.
TEST(ModelParallelIntegrationTest,
     ContextParallelSlotsShardOverReplicasTimesContext) {
  ElasticJob job = ParallelJob();
  job.name = "tp2cp2";
  job.pipeline = 1;
  job.context = 2;
  job.instances = 1;
  job.min_world = 8;
  job.resize = "keep_i";
  auto spec = job.Spec();
  ASSERT_TRUE(spec.ok()) << spec.status();
  ElasticRun run(job);
  ASSERT_TRUE(run.Start().ok()) << run.CoordinatorLog();
  const std::vector<std::string> names = WorkerNames(8);
  ASSERT_TRUE(run.StartWorkers(names).ok());
  auto status = run.WaitForRanksAtStep(8, 5, kStartMs);
  ASSERT_TRUE(status.ok()) << status.status() << "\n" << run.Diagnostics();
  EXPECT_EQ(status->parallel().context(), 2) << status->ShortDebugString();
  // Every rank is in its slot's one instance at its data-parallel rank.
  for (const v1::MemberStatus& m : RankedMembers(*status)) {
    const plan::Position p = plan::PositionOf(spec->parallel, 8, m.rank());
    EXPECT_EQ(m.instance(), 0) << m.ShortDebugString();
    EXPECT_EQ(m.shard_rank(), plan::DataParallelRank(spec->parallel, p))
        << m.ShortDebugString();
  }
  ExpectExitedZero(run, names);
  ExpectParallelMasters(run, 8);
}

}  // namespace
}  // namespace zshard::testing
