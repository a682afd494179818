// The `regression` workload: a two-layer MLP y = W2 relu(W1 x + b1) + b2
// trained on generated data (a fixed random teacher of the same shape) with
// a squared-error loss. Forward and backward run on the CPU in fp32 from the
// stored (e.g. bf16) params; the global batch is split by b % W == r.
#pragma once

#include <cstdint>

#include "client/worker/engine/workload.h"
#include "common/job/job_spec.h"
#include "common/job/workload_model.h"
#include "common/plan/model_spec.h"

namespace zshard::engine {

// The MLP's sizes and model spec are the job spec's (common/job), which
// checks that a regression job's model is this MLP.
using job::MlpShape;
using job::RegressionModelSpec;

class RegressionWorkload final : public Workload {
 public:
  struct Options {
    MlpShape shape;
    // B >= 1 (the job spec's default).
    int64_t global_batch = job::WorkloadSpec().global_batch;
    int world = 1;      // W >= 1
    int rank = 0;       // in [0, W)
    uint64_t seed = 1;  // data, teacher and initial params
  };

  explicit RegressionWorkload(const Options& options);

  // Uniform in +-1/sqrt(fan_in) (weights), 0 (biases).
  void InitialParam(int p, absl::Span<float> out) const override;
  // Loss of a sample: 0.5 * sum over outputs of (y - target)^2; returns the
  // sum over this rank's samples (the global mean is the world sum / B).
  absl::StatusOr<double> Gradients(int64_t step, ModelState& state) override;
  bool has_loss() const override { return true; }
  int64_t global_batch() const override { return options_.global_batch; }

 private:
  const Options options_;
};

}  // namespace zshard::engine
