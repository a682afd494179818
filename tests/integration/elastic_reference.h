// The numbers elastic integration tests compare against: the unsharded
// reference masters of the synthetic workload after a number of steps
// (engine::ReferenceOptimizer), the comparison of a --dump-master directory
// with them, and the optimizer-state elements a rank owns under a plan.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/job/job_spec.h"

namespace zshard::testing {

// Masters by param index (registration order); an expert param's
// expert-parallel copies concatenated (engine::ReferenceOptimizer::master).
using Masters = std::vector<std::vector<float>>;

// The world and instance count a step ran at.
struct Topology {
  int world = 1;
  int instances = 1;
};

// The reference masters of `job` (synthetic workload) after `steps` steps
// at `world` ranks in `instances` instances.
absl::StatusOr<Masters> ReferenceMasters(const job::JobSpec& job, int world,
                                         int instances, int64_t steps);
// The same with step t (1-based) at by_step[t - 1]: the gradients of each
// step are rounded as that step's world rounds them (what a run whose
// world changed did); by_step.size() steps.
absl::StatusOr<Masters> ReferenceMasters(const job::JobSpec& job,
                                         const std::vector<Topology>& by_step);

// The bound the training integration test uses: (steps x 4 + 1) ulps of the
// largest |master| of `reference`.
double MasterTolerance(const Masters& reference, int64_t steps);

// The largest |a - b| over every element (infinity on a shape mismatch).
double MaxDifference(const Masters& a, const Masters& b);

// The result of comparing a dump with the reference.
struct DumpCheck {
  double max_diff = 0;  // max |dumped - reference|
  double tolerance = 0;
  // max |reference(steps) - reference(steps - 1)|: what one step more or
  // less would show (the comparison can fail).
  double one_step = 0;
  // Ranks that wrote an index file, sorted.
  std::vector<int> dumped_ranks;
  bool ok() const { return max_diff <= tolerance && one_step > tolerance; }
  std::string ToString() const;
};

// Loads `dump_dir` (engine::LoadMasters: every element covered, replicas
// equal) and compares it with the reference of the steps of `by_step`.
// Errors when the dump cannot be loaded.
absl::StatusOr<DumpCheck> CheckDump(const std::string& dump_dir,
                                    const job::JobSpec& job,
                                    const std::vector<Topology>& by_step);

// Parameter elements (padding excluded) whose optimizer state `rank` owns
// in the plan of `job` at `world` ranks (instances from the job).
absl::StatusOr<int64_t> OwnedElements(const job::JobSpec& job, int world,
                                      int rank);

}  // namespace zshard::testing
