// A worker rank's single-slot view of a model-parallel job.
#include "common/job/job_slot.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/plan/parallel_plan.h"

namespace zshard::job {

absl::Span<const plan::ModelSpec> SlotModels(const JobSpec& job) {
  return job.parallel.model_parallel() ? absl::MakeConstSpan(job.slots)
                                       : absl::MakeConstSpan(&job.model, 1);
}

JobSpec SlotSpec(const JobSpec& job, int slot) {
  JobSpec spec = job;
  if (!job.parallel.model_parallel()) return spec;
  spec.model = job.slots[static_cast<size_t>(slot)];
  spec.slots.clear();
  spec.world = SlotWorld(job);
  spec.parallel = plan::ParallelSizes{};
  return spec;
}

absl::StatusOr<SlotJob> SlotJobOf(const JobSpec& job, int world, int rank) {
  const plan::ParallelSizes& sizes = job.parallel;
  if (absl::Status ok = plan::CheckParallelWorld(sizes, world); !ok.ok()) {
    return ok;
  }
  if (rank < 0 || rank >= world) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, " is not in [0, ", world, ")"));
  }
  if (sizes.model_parallel() &&
      static_cast<int>(job.slots.size()) != sizes.slots()) {
    return absl::InvalidArgumentError(
        absl::StrCat("job '", job.name, "' has ", job.slots.size(),
                     " slot models, want ", sizes.slots()));
  }
  SlotJob out;
  out.position = plan::PositionOf(sizes, world, rank);
  out.slot = plan::SlotIndex(sizes, out.position.tp, out.position.pp);
  out.world = plan::DataParallelSize(sizes, world);
  out.rank = plan::DataParallelRank(sizes, out.position);
  out.spec = SlotSpec(job, out.slot);
  out.group = plan::DataParallelGroup(sizes, world, rank);
  for (int s = 0; s < sizes.slots(); ++s) {
    plan::Position p = out.position;
    p.tp = plan::SlotTp(sizes, s);
    p.pp = plan::SlotPp(sizes, s);
    out.across.push_back(plan::RankOf(sizes, world, p));
  }
  return out;
}

std::string ParallelJobHash(const JobSpec& job, int world) {
  return plan::ParallelPlanHash(JobParallelModel(job),
                                JobParallelPlanOptions(job, world));
}

}  // namespace zshard::job
