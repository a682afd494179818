// The reference of a model-parallel synthetic job (docs/design.md section
// 13): one unsharded reference optimizer per slot (tp, pp), over the
// slot's data-parallel domain of R x C ranks, all sharing the world's grad
// norm (every slot's squared norm summed, a tp_replicated param counted
// on tensor rank 0 only), and the comparison of a model-parallel run's
// dump (one folder per slot) with it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/job/job_spec.h"
#include "tests/integration/elastic_reference.h"

namespace zshard::testing {

// Every slot's reference masters (by slot index) after `steps` steps at
// `world` workers. With `world_norm` false each slot clips with its own
// norm instead (what a step without the commit across slots would do).
absl::StatusOr<std::vector<Masters>> ParallelReferenceMasters(
    const job::JobSpec& job, int world, int64_t steps, bool world_norm = true);

// Each slot's dumped masters (`dump_dir`/slot-<s>, engine::LoadMasters),
// by slot, each by param index.
absl::StatusOr<std::vector<Masters>> LoadParallelDump(
    const std::string& dump_dir, const job::JobSpec& job);

// Loads each slot's dump (`dump_dir`/slot-<s>) and compares it with the
// reference of `steps` steps at `world`; one DumpCheck per slot (its
// max_diff, tolerance and one_step over that slot's params).
absl::StatusOr<std::vector<DumpCheck>> CheckParallelDump(
    const std::string& dump_dir, const job::JobSpec& job, int world,
    int64_t steps);

}  // namespace zshard::testing
