// Assertions and lookups shared by the tests that run an ElasticRun: who
// holds a rank, clean exits, and the dumped masters against the reference
// of the run's own world history.
#pragma once

#include <string>
#include <vector>

#include "tests/integration/elastic_cluster.h"

namespace zshard::testing {

// How long a test waits for a cluster to start, and for workers to exit.
inline constexpr int64_t kStartMs = 60000;
inline constexpr int64_t kExitMs = 120000;

// The rollback setting: I = 1 (no replica), world 2..3, `steps` steps and a
// checkpoint every 10 steps in "ckpt": a killed rank's ranges can only come
// back from a checkpoint.
ElasticJob RollbackJob(int64_t steps);

// The name of the member holding `rank`, or "".
std::string HolderOf(const v1::GetClusterStatusResponse& status, int rank);

// Milliseconds since the epoch on the wall clock (events carry its time).
int64_t WallMs();

// The name of a spare member (the last listed), or "".
std::string SpareOf(const v1::GetClusterStatusResponse& status);

// `names` without `name`.
std::vector<std::string> Without(std::vector<std::string> names,
                                 const std::string& name);

// Asserts that `names` all exited 0 (waits up to kExitMs).
void ExpectExitedZero(ElasticRun& run, const std::vector<std::string>& names);

// The dir of the finished `run`'s checkpoint of step `step`
// (job.checkpoint_dir/step-NNNNNNNN), asserting that its manifest is
// written within 10 s.
std::string FinishedCheckpoint(ElasticRun& run, int64_t step);

// `job` as a restore's second run: world fixed at `world`, `steps` steps and
// no checkpoints of its own.
ElasticJob RestoredJob(ElasticJob job, int world, int64_t steps);

// Starts `run` (a RestoredJob) with --restore `dir` and `world` workers and
// asserts that every worker exits 0 having resumed (it never ran step 1)
// and reached the job's last step, and that the restore is in the events.
void ExpectRestoredRun(ElasticRun& run, const std::string& dir, int world);

// Asserts the dump equals the reference of the run's own world history
// (steps before it: `before`) and was written by ranks 0..world-1 exactly.
void ExpectReferenceMasters(ElasticRun& run, int world,
                            const std::vector<Topology>& before = {});

}  // namespace zshard::testing
