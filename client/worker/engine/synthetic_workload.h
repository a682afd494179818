// The `synthetic` workload of DESIGN.md section 5, exactly: sample b's
// gradient for element i (index in the concatenation of every param in
// registration order, unpadded) at 1-based step t is
// 0.01 * sin(0.001*i + 0.37*t + 0.11*b); rank r of W sums the samples with
// b % W == r; initial params are 0.02 * cos(0.0007*i).
#pragma once

#include <cstdint>
#include <vector>

#include "client/worker/engine/workload.h"
#include "common/plan/model_spec.h"

namespace zshard::engine {

// Arithmetic: each sample's value is evaluated in double and rounded to
// fp32; a rank's samples are summed in fp32 in increasing b; the sum is
// rounded once to the grad dtype by ModelState::WriteGrad. Initial values
// are evaluated in double and rounded to fp32 (then to the param dtype).
class SyntheticWorkload final : public Workload {
 public:
  struct Options {
    int64_t global_batch = 64;  // B >= 1
    int world = 1;              // W >= 1
    int rank = 0;               // in [0, W)
  };

  SyntheticWorkload(const plan::ModelSpec& model, const Options& options);

  void InitialParam(int p, absl::Span<float> out) const override;
  absl::StatusOr<double> Gradients(int64_t step, ModelState& state) override;
  bool has_loss() const override { return false; }
  int64_t global_batch() const override { return options_.global_batch; }

  // This rank's fp32 gradient sum of element i at step t (the formula).
  static float RankGradient(int64_t i, int64_t t, int64_t global_batch,
                            int world, int rank);
  // 0.02 * cos(0.0007 * i), rounded to fp32.
  static float InitialValue(int64_t i);

 private:
  const Options options_;
  std::vector<int64_t> offsets_;  // first global element index per param
  std::vector<int64_t> numels_;
};

}  // namespace zshard::engine
