// Which models each workload kind can run: the one rule that the job spec's
// validation (coordinator start, zshardctl) and the worker's workloads share,
// and the model of the `regression` workload (a two-layer MLP).
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/job/job_spec.h"
#include "common/plan/model_spec.h"

namespace zshard::job {

// The sizes of the regression workload's MLP y = W2 relu(W1 x + b1) + b2.
struct MlpShape {
  int inputs = 16;  // x dimension
  int hidden = 64;  // relu units
  int outputs = 4;  // y dimension
};

// The model spec of the MLP, params in registration order: "fc1.weight"
// [hidden, inputs], "fc1.bias" [hidden], "fc2.weight" [outputs, hidden],
// "fc2.bias" [outputs]; biases carry no_weight_decay.
plan::ModelSpec RegressionModelSpec(const MlpShape& shape,
                                    plan::DType dtype = plan::DType::kBf16);

// The MLP shape of `model` when it is RegressionModelSpec's for some shape
// and one dtype (no_weight_decay flags are not compared); else
// InvalidArgument in one line naming the problem or the param.
absl::StatusOr<MlpShape> RegressionMlpShape(const plan::ModelSpec& model);

// OK when a workload of `kind` can run `model`: idle and synthetic run any
// model, regression only RegressionModelSpec's MLP (see RegressionMlpShape).
// InvalidArgument in one line otherwise.
absl::Status CheckWorkloadModel(WorkloadKind kind,
                                const plan::ModelSpec& model);

}  // namespace zshard::job
