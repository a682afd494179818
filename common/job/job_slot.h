// One worker rank's view of a model-parallel job (docs/design.md section
// 13): the single-slot job its slot (tp, pp) runs, over the slot's
// data-parallel domain of R x C ranks, and where the rank sits in it.
// Everything a worker does with its own state (the plan, the workload, the
// buffers, the step's reduce-scatter and all-gather, the moves) is that
// single-slot job's; only the commit point's all-reduce spans every slot.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/job/job_spec.h"
#include "common/plan/parallel.h"

namespace zshard::job {

struct SlotJob {
  // The slot's job: model = the slot's params, parallel all 1, world.min
  // and world.max divided by T x P (data-parallel sizes), everything else
  // as the job's. JobPlanOptions(spec, world) is the slot's plan options
  // (plan::SlotPlanOptions of JobParallelPlanOptions).
  JobSpec spec;
  plan::Position position;
  int slot = 0;   // plan::SlotIndex(position.tp, position.pp)
  int world = 1;  // R x C: the slot's data-parallel size
  int rank = 0;   // the data-parallel rank: cp + C x replica
  // The global ranks of the slot's data-parallel domain, by data-parallel
  // rank (world of them).
  std::vector<int> group;
  // The global ranks at this rank's data-parallel rank in every slot, by
  // slot index (T x P of them): the commit point's group across slots.
  std::vector<int> across;
};

// The slot job of global rank `rank` in a world of `world` workers. A job
// without model parallelism is its own slot job (group 0..world-1, across
// {rank}). InvalidArgument when the world is not a multiple of T x P x C
// or the rank is outside it.
absl::StatusOr<SlotJob> SlotJobOf(const JobSpec& job, int world, int rank);

// The model of every slot of `job`, by slot index: its slots, or its one
// model without model parallelism. Borrows `job`.
absl::Span<const plan::ModelSpec> SlotModels(const JobSpec& job);

// The single-slot job of slot `slot` (spec only, as SlotJob::spec).
JobSpec SlotSpec(const JobSpec& job, int slot);

// The hash a model-parallel job's epoch carries for `world`: the whole
// parallel plan's (plan::ParallelPlanHash), without making the plans.
std::string ParallelJobHash(const JobSpec& job, int world);

}  // namespace zshard::job
