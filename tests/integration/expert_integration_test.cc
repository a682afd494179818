// A mixture-of-experts job end to end with real processes on 127.0.0.1:
// a small model whose params are partly flagged expert, layout
// expert_parallel 2, the synthetic workload. At W = 4 (I = 1: expert shard
// groups of 2 ranks; I = 2: of one rank) the dumped masters of both
// expert-parallel ranks equal the unsharded reference. A live re-shard
// where a SIGTERM'd rank hands its state over and a survivor's
// expert-parallel rank changes (W 4 -> 2) ends with the reference of the
// run's world history, and the live ledger's measured bytes equal the
// planner's before and after it. A checkpoint of an expert job restores
// at another world.
#include <signal.h>

#include <filesystem>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/integration/elastic_cluster.h"
#include "tests/integration/elastic_expect.h"
#include "tests/testing/log_scan.h"
#include "tests/testing/wait_for.h"

namespace zshard::testing {
namespace {

using nlohmann::json;

// Params 1, 2 and 4 (300, 2500 and 130 elements) are experts: with
// bucket_size 600 the dense and the expert buffer get several buckets.
ElasticJob ExpertJob() {
  ElasticJob job;
  job.name = "moe";
  job.expert_params = {1, 2, 4};
  job.expert_parallel = 2;
  job.min_world = 2;
  job.max_world = 4;
  return job;
}

// The ledger of `run` (zshardctl ledger --output json), or an error.
absl::StatusOr<json> Ledger(ElasticRun& run) {
  const int rc = run.cluster().RunCtl(
      {"ledger", "--output", "json", "--timeout-ms", "3000"});
  const std::string out = ReadLog(run.File("ctl.out"));
  if (rc != 0) return absl::UnavailableError(absl::StrCat("exit ", rc, out));
  json j = json::parse(out, nullptr, false);
  if (j.is_discarded()) return absl::InternalError("not json: " + out);
  return j;
}

// Waits until every one of `world` ranks of epoch >= `epoch` reports
// measured bytes equal to the predicted ones in every category.
void ExpectLedgerMatches(ElasticRun& run, int world, int64_t epoch) {
  json last;
  const bool ok = WaitFor(
      [&] {
        absl::StatusOr<json> ledger = Ledger(run);
        if (!ledger.ok()) return false;
        last = *ledger;
        if (last["epoch"].get<int64_t>() < epoch) return false;
        if (last["ranks"].size() != static_cast<size_t>(world)) return false;
        for (const json& r : last["ranks"]) {
          if (r["measured_bytes"].is_null() ||
              r["measured_bytes"] != r["predicted_bytes"]) {
            return false;
          }
          for (const char* c :
               {"param", "grad", "master", "exp_avg", "exp_avg_sq"}) {
            if (r["categories"][c]["measured"] !=
                r["categories"][c]["predicted"]) {
              return false;
            }
          }
        }
        return true;
      },
      30000, 100);
  EXPECT_TRUE(ok) << last.dump(1);
}

struct Case {
  int instances;
  bool grad_reduce_in_fp32;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << "I=" << c.instances
      << (c.grad_reduce_in_fp32 ? " fp32 grads" : " bf16 grads");
}

class ExpertTrainingTest : public ::testing::TestWithParam<Case> {};

TEST_P(ExpertTrainingTest, DumpedMastersMatchUnshardedReference) {
  const Case c = GetParam();
  ElasticJob job = ExpertJob();
  job.instances = c.instances;
  job.min_world = 4;
  job.grad_reduce_in_fp32 = c.grad_reduce_in_fp32;
  job.steps = 8;
  job.step_delay_ms = 0;
  ElasticRun run(job);
  ASSERT_TRUE(run.Start().ok());
  const std::vector<std::string> names = WorkerNames(4);
  ASSERT_TRUE(run.StartWorkers(names).ok());
  ExpectExitedZero(run, names);
  // A run without transitions: every step at W = 4.
  absl::StatusOr<job::JobSpec> spec = job.Spec();
  ASSERT_TRUE(spec.ok()) << spec.status();
  absl::StatusOr<DumpCheck> check =
      CheckDump(run.dump_dir(), *spec,
                std::vector<Topology>(job.steps, Topology{4, c.instances}));
  ASSERT_TRUE(check.ok()) << check.status() << "\n" << run.Diagnostics();
  EXPECT_TRUE(check->ok()) << check->ToString();
  EXPECT_EQ(check->dumped_ranks, (std::vector<int>{0, 1, 2, 3}));
}

INSTANTIATE_TEST_SUITE_P(Cases, ExpertTrainingTest,
                         ::testing::Values(Case{1, false}, Case{1, true},
                                           Case{2, false}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return absl::StrCat("I", info.param.instances,
                                               info.param.grad_reduce_in_fp32
                                                   ? "_fp32grads"
                                                   : "_bf16grads");
                         });

// W = 4, E = 2, I = 1, four workers; SIGTERM the holder of rank 1. Three
// remain, but D = 3 is no multiple of E: the world shrinks to 2. Rank 1 is
// refilled by the old rank 2 (expert-parallel rank 0 -> 1), whose expert
// state must come from the leaver, not from its own buffers; the old rank
// 3 becomes a spare.
TEST(ExpertElasticTest, LeaveChangesASurvivorsExpertRankLive) {
  ElasticJob job = ExpertJob();
  job.steps = 60;
  ElasticRun run(job);
  ASSERT_TRUE(run.Start().ok());
  const std::vector<std::string> names = WorkerNames(4);
  ASSERT_TRUE(run.StartWorkers(names).ok());
  auto before = run.WaitForRanksAtStep(4, 5, kStartMs);
  ASSERT_TRUE(before.ok()) << before.status() << "\n" << run.Diagnostics();
  ExpectLedgerMatches(run, 4, before->epoch());
  const std::string leaver = HolderOf(*before, 1);
  const std::string mover = HolderOf(*before, 2);
  ASSERT_FALSE(leaver.empty());
  ASSERT_FALSE(mover.empty());
  const int64_t seq = LastSeq(run.Events());
  run.cluster().worker(leaver)->Signal(SIGTERM);
  std::optional<int> code = run.cluster().worker(leaver)->Wait(kStartMs);
  EXPECT_EQ(code, 0) << run.Diagnostics();

  auto after = run.WaitForRanksAtStep(2, MinRankedStep(*before), kStartMs);
  ASSERT_TRUE(after.ok()) << after.status() << "\n" << run.Diagnostics();
  EXPECT_EQ(HolderOf(*after, 1), mover) << after->ShortDebugString();
  ExpectLedgerMatches(run, 2, after->epoch());
  ExpectExitedZero(run, Without(names, leaver));

  const std::vector<v1::Event> events = run.Events();
  for (const char* kind : {"rollback", "restore", "lost"}) {
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
  ExpectReferenceMasters(run, 2);
}

// A finished expert job's checkpoint (world 2, I = 1, E = 2: expert shard
// groups of one rank, step 20; its rank files record each range's expert
// rank) restored by a new coordinator at world 4 (expert shard groups of
// two): it resumes at step 20 and reaches the reference masters of 30
// steps.
TEST(ExpertElasticTest, CheckpointRestoresAtAnotherWorld) {
  ElasticJob first = ExpertJob();
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

  ElasticRun b(RestoredJob(a.job(), 4, 30));
  ExpectRestoredRun(b, dir, 4);
  ExpectReferenceMasters(b, 4, a.Schedule());
}

}  // namespace
}  // namespace zshard::testing
