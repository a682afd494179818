// MakeWorkload: job spec -> workload.
#include "client/worker/engine/workload_factory.h"

#include "absl/strings/str_cat.h"
#include "client/worker/engine/regression_workload.h"
#include "client/worker/engine/synthetic_workload.h"
#include "common/job/workload_model.h"

namespace zshard::engine {

absl::StatusOr<std::unique_ptr<Workload>> MakeWorkload(const job::JobSpec& job,
                                                       int world, int rank) {
  if (world < 1 || rank < 0 || rank >= world) {
    return absl::InvalidArgumentError(absl::StrCat(
        "workload: rank ", rank, " is outside a world of ", world));
  }
  const int experts = job.layout.expert_parallel;
  switch (job.workload.kind) {
    case job::WorkloadKind::kSynthetic: {
      if (experts < 1 || world % experts != 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("workload: layout.expert_parallel (", experts,
                         ") does not divide the world (", world, ")"));
      }
      SyntheticWorkload::Options o;
      o.global_batch = job.workload.global_batch;
      o.world = world;
      o.rank = rank;
      o.expert_parallel = experts;
      return std::make_unique<SyntheticWorkload>(job.model, o);
    }
    case job::WorkloadKind::kRegression: {
      // The MLP is one model on every rank: experts that differ per
      // expert-parallel rank have no place in it.
      for (const plan::ParamSpec& p : job.model.params) {
        if (p.expert && experts > 1) {
          return absl::InvalidArgumentError(absl::StrCat(
              "workload: regression has no expert params, but '", p.name,
              "' is one with layout.expert_parallel ", experts));
        }
      }
      absl::StatusOr<MlpShape> shape = job::RegressionMlpShape(job.model);
      if (!shape.ok()) return shape.status();
      RegressionWorkload::Options o;
      o.shape = *shape;
      o.global_batch = job.workload.global_batch;
      o.world = world;
      o.rank = rank;
      return std::make_unique<RegressionWorkload>(o);
    }
    case job::WorkloadKind::kTrainer:
      return absl::InvalidArgumentError(
          "workload: the trainer workload's gradients come from a trainer "
          "process (client/worker/trainer), not from the engine");
    case job::WorkloadKind::kIdle:
      break;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("workload: kind '", job::WorkloadKindName(job.workload.kind),
                   "' produces no gradients"));
}

}  // namespace zshard::engine
