// The regression MLP's model spec and the workload-model rule.
#include "common/job/workload_model.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace zshard::job {

plan::ModelSpec RegressionModelSpec(const MlpShape& shape, plan::DType dtype) {
  plan::ModelSpec spec;
  spec.name = "regression-mlp";
  auto add = [&](const char* name, std::vector<int64_t> dims, bool bias) {
    plan::ParamSpec p;
    p.name = name;
    p.shape = std::move(dims);
    p.dtype = dtype;
    p.no_weight_decay = bias;
    spec.params.push_back(std::move(p));
  };
  add("fc1.weight", {shape.hidden, shape.inputs}, false);
  add("fc1.bias", {shape.hidden}, true);
  add("fc2.weight", {shape.outputs, shape.hidden}, false);
  add("fc2.bias", {shape.outputs}, true);
  return spec;
}

absl::StatusOr<MlpShape> RegressionMlpShape(const plan::ModelSpec& model) {
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

absl::Status CheckWorkloadModel(WorkloadKind kind,
                                const plan::ModelSpec& model) {
  switch (kind) {
    case WorkloadKind::kIdle:
    case WorkloadKind::kSynthetic:
    case WorkloadKind::kTrainer:
      return absl::OkStatus();
    case WorkloadKind::kRegression:
      return RegressionMlpShape(model).status();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("workload kind ", static_cast<int>(kind), " is unknown"));
}

}  // namespace zshard::job
