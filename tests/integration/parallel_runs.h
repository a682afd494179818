// Runs of the model-parallel synthetic job shared by the model-parallel
// integration tests: the T = 2, P = 2 job, an undisturbed run's masters and
// the checks of a run's dump against the reference or another run.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tests/integration/elastic_cluster.h"
#include "tests/integration/elastic_reference.h"

namespace zshard::testing {

// T = 2, P = 2, world 4..8 in two instances (keep_d: D = 1 at R = 2), 40
// steps, and a clipping bound the synthetic gradients exceed, so that the
// result depends on the norm being the world's.
ElasticJob ParallelJob();

// Each slot's dumped masters of `run` equal the reference of
// run.job().steps at `world` (within the reference's tolerance).
void ExpectParallelMasters(ElasticRun& run, int world);

// The dumped masters of an undisturbed run of `job` at `world` workers.
absl::StatusOr<std::vector<Masters>> UndisturbedMasters(const ElasticJob& job,
                                                        int world);

// Every slot of `got` equals `want` bit for bit; `what` names `got` in the
// failure message.
void ExpectSameMasters(const std::vector<Masters>& got,
                       const std::vector<Masters>& want,
                       const std::string& what);

}  // namespace zshard::testing
