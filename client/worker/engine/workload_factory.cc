// MakeWorkload: job spec -> workload.
#include "client/worker/engine/workload_factory.h"

#include "absl/strings/str_cat.h"
#include "client/worker/engine/regression_workload.h"
#include "client/worker/engine/synthetic_workload.h"

namespace zshard::engine {
namespace {

// The MLP shape of a model spec, when it is RegressionModelSpec's.
absl::StatusOr<MlpShape> MlpShapeOf(const plan::ModelSpec& model) {
  if (model.params.size() != 4 || model.params[0].shape.size() != 2 ||
      model.params[2].shape.size() != 2) {
    return absl::InvalidArgumentError(
        "regression workload: the model must be the two-layer mlp "
        "(fc1.weight, fc1.bias, fc2.weight, fc2.bias)");
  }
  MlpShape shape;
  shape.hidden = static_cast<int>(model.params[0].shape[0]);
  shape.inputs = static_cast<int>(model.params[0].shape[1]);
  shape.outputs = static_cast<int>(model.params[2].shape[0]);
  const plan::ModelSpec want =
      RegressionModelSpec(shape, model.params[0].dtype);
  for (size_t p = 0; p < want.params.size(); ++p) {
    const plan::ParamSpec& a = model.params[p];
    const plan::ParamSpec& b = want.params[p];
    if (a.name != b.name || a.shape != b.shape || a.dtype != b.dtype) {
      return absl::InvalidArgumentError(
          absl::StrCat("regression workload: param '", a.name,
                       "' does not match the mlp's '", b.name, "'"));
    }
  }
  return shape;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Workload>> MakeWorkload(const job::JobSpec& job,
                                                       int world, int rank) {
  if (world < 1 || rank < 0 || rank >= world) {
    return absl::InvalidArgumentError(absl::StrCat(
        "workload: rank ", rank, " is outside a world of ", world));
  }
  switch (job.workload.kind) {
    case job::WorkloadKind::kSynthetic: {
      SyntheticWorkload::Options o;
      o.global_batch = job.workload.global_batch;
      o.world = world;
      o.rank = rank;
      return std::make_unique<SyntheticWorkload>(job.model, o);
    }
    case job::WorkloadKind::kRegression: {
      absl::StatusOr<MlpShape> shape = MlpShapeOf(job.model);
      if (!shape.ok()) return shape.status();
      RegressionWorkload::Options o;
      o.shape = *shape;
      o.global_batch = job.workload.global_batch;
      o.world = world;
      o.rank = rank;
      return std::make_unique<RegressionWorkload>(o);
    }
    case job::WorkloadKind::kIdle:
      break;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("workload: kind '", job::WorkloadKindName(job.workload.kind),
                   "' produces no gradients"));
}

}  // namespace zshard::engine
