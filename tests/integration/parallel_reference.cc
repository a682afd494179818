// The reference of a model-parallel synthetic job and its dump check.
#include "tests/integration/parallel_reference.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/worker/engine/master_dump.h"
#include "client/worker/engine/reference_optimizer.h"
#include "client/worker/engine/workload_factory.h"
#include "common/job/job_slot.h"
#include "common/plan/parallel.h"
#include "common/status.h"

namespace zshard::testing {
namespace {

// One slot's reference and what its step needs.
struct SlotReference {
  job::JobSpec spec;
  std::vector<bool> norm_skips;
  std::unique_ptr<engine::Workload> init;
  std::unique_ptr<engine::ReferenceOptimizer> optimizer;
};

}  // namespace

absl::StatusOr<std::vector<Masters>> ParallelReferenceMasters(
    const job::JobSpec& job, int world, int64_t steps, bool world_norm) {
  const plan::ParallelSizes& sizes = job.parallel;
  ZSHARD_RETURN_IF_ERROR(plan::CheckParallelWorld(sizes, world));
  const int dp = plan::DataParallelSize(sizes, world);
  const int instances = job::JobParallelPlanOptions(job, world).instances;
  std::vector<SlotReference> slots(static_cast<size_t>(sizes.slots()));
  for (int s = 0; s < sizes.slots(); ++s) {
    SlotReference& ref = slots[static_cast<size_t>(s)];
    ref.spec = job::SlotSpec(job, s);
    for (const plan::ParamSpec& p : ref.spec.model.params) {
      ref.norm_skips.push_back(
          !plan::CountsInGradNorm(p, plan::SlotTp(sizes, s)));
    }
    engine::ReferenceOptimizer::Options options;
    options.world = dp;
    options.instances = instances;
    options.grad_reduce_in_fp32 = job.layout.grad_reduce_in_fp32;
    options.optimizer = job.optimizer;
    ZSHARD_ASSIGN_OR_RETURN(ref.init, engine::MakeWorkload(ref.spec, 1, 0));
    ref.optimizer = std::make_unique<engine::ReferenceOptimizer>(
        ref.spec.model, options, *ref.init);
  }
  for (int64_t t = 0; t < steps; ++t) {
    std::vector<engine::ReferenceOptimizer::Reduced> reduced;
    double sum_squares = 0;
    bool finite = true;
    for (SlotReference& ref : slots) {
      std::vector<std::unique_ptr<engine::Workload>> ranks;
      std::vector<engine::Workload*> rank_workloads;
      for (int r = 0; r < dp; ++r) {
        ZSHARD_ASSIGN_OR_RETURN(std::unique_ptr<engine::Workload> w,
                                engine::MakeWorkload(ref.spec, dp, r));
        ranks.push_back(std::move(w));
        rank_workloads.push_back(ranks.back().get());
      }
      ZSHARD_ASSIGN_OR_RETURN(
          engine::ReferenceOptimizer::Reduced r,
          ref.optimizer->Reduce(rank_workloads, ref.norm_skips));
      sum_squares += r.sum_squares;
      finite = finite && r.finite;
      reduced.push_back(r);
    }
    for (size_t s = 0; s < slots.size(); ++s) {
      const double sq = world_norm ? sum_squares : reduced[s].sum_squares;
      const bool ok = world_norm ? finite : reduced[s].finite;
      ZSHARD_RETURN_IF_ERROR(slots[s].optimizer->Apply(sq, ok).status());
    }
  }
  std::vector<Masters> out;
  for (const SlotReference& ref : slots) {
    Masters masters;
    for (size_t p = 0; p < ref.spec.model.params.size(); ++p) {
      masters.push_back(ref.optimizer->master(static_cast<int>(p)));
    }
    out.push_back(std::move(masters));
  }
  return out;
}

absl::StatusOr<std::vector<Masters>> LoadParallelDump(
    const std::string& dump_dir, const job::JobSpec& job) {
  std::vector<Masters> out;
  for (int s = 0; s < job.parallel.slots(); ++s) {
    const job::JobSpec spec = job::SlotSpec(job, s);
    const std::string dir = absl::StrCat(dump_dir, "/slot-", s);
    ZSHARD_ASSIGN_OR_RETURN(auto loaded, engine::LoadMasters(dir, spec.model));
    Masters dumped;
    for (const plan::ParamSpec& p : spec.model.params) {
      auto it = loaded.find(p.name);
      if (it == loaded.end()) {
        return absl::NotFoundError(
            absl::StrCat(dir, ": no param '", p.name, "'"));
      }
      dumped.push_back(it->second);
    }
    out.push_back(std::move(dumped));
  }
  return out;
}

absl::StatusOr<std::vector<DumpCheck>> CheckParallelDump(
    const std::string& dump_dir, const job::JobSpec& job, int world,
    int64_t steps) {
  if (steps < 1) {
    return absl::InvalidArgumentError("a dump check needs at least one step");
  }
  ZSHARD_ASSIGN_OR_RETURN(std::vector<Masters> reference,
                          ParallelReferenceMasters(job, world, steps));
  ZSHARD_ASSIGN_OR_RETURN(std::vector<Masters> previous,
                          ParallelReferenceMasters(job, world, steps - 1));
  ZSHARD_ASSIGN_OR_RETURN(std::vector<Masters> dumps,
                          LoadParallelDump(dump_dir, job));
  std::vector<DumpCheck> out;
  for (size_t s = 0; s < reference.size(); ++s) {
    const Masters& dumped = dumps[s];
    DumpCheck check;
    check.max_diff = MaxDifference(dumped, reference[s]);
    check.tolerance = MasterTolerance(reference[s], steps);
    check.one_step = MaxDifference(reference[s], previous[s]);
    out.push_back(check);
  }
  return out;
}

}  // namespace zshard::testing
