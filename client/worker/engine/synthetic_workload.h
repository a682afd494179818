// The `synthetic` workload of docs/design.md section 5, exactly: sample b's
// gradient for element i (index in the concatenation of every param in
// registration order, unpadded) at 1-based step t is
// 0.01 * sin(0.001*i + 0.37*t + 0.11*b); rank r of W sums the samples with
// b % W == r; initial params are 0.02 * cos(0.0007*i).
//
// Expert params (ParamSpec::expert) with expert_parallel E: the spec lists
// the experts of one expert-parallel rank, and expert-parallel rank e
// (rank % E) holds its own, different experts. Their element i is
// addressed as i + e*P (P: the spec's unpadded parameter count), in the
// gradient formula and in the initial value, so every expert-parallel rank
// trains different values. As in a mixture of experts whose all-to-all
// brings an expert the tokens of its whole expert-parallel group (ranks
// E*g .. E*g + E-1, g = r / E), rank r sums, for its experts, the samples
// of its group: b with (b % W) / E == r / E. The ranks holding expert rank
// e's experts (r % E == e) thus cover every sample once between them: the
// reduced expert gradient is the whole batch's, divided by B like a dense
// one (Megatron divides expert gradients by the full data-parallel size
// too), and does not depend on W for a given E. With E = 1 an expert param
// is trained exactly like a dense one.
#pragma once

#include <cstdint>
#include <vector>

#include "client/worker/engine/workload.h"
#include "common/job/job_spec.h"
#include "common/plan/model_spec.h"

namespace zshard::engine {

// Arithmetic: each sample's value is evaluated in double and rounded to
// fp32; a rank's samples are summed in fp32 in increasing b; the sum is
// rounded once to the grad dtype by ModelState::WriteGrad. Initial values
// are evaluated in double and rounded to fp32 (then to the param dtype).
class SyntheticWorkload final : public Workload {
 public:
  struct Options {
    // B >= 1 (the job spec's default).
    int64_t global_batch = job::WorkloadSpec().global_batch;
    int world = 1;            // W >= 1
    int rank = 0;             // in [0, W)
    int expert_parallel = 1;  // E >= 1, divides W
  };

  SyntheticWorkload(const plan::ModelSpec& model, const Options& options);

  // For an expert param: the values of this rank's expert-parallel rank.
  void InitialParam(int p, absl::Span<float> out) const override;
  absl::StatusOr<double> Gradients(int64_t step, ModelState& state) override;
  bool has_loss() const override { return false; }
  int64_t global_batch() const override { return options_.global_batch; }

  // This rank's fp32 gradient sum of element i at step t (the formula).
  static float RankGradient(int64_t i, int64_t t, int64_t global_batch,
                            int world, int rank);
  // This rank's fp32 gradient sum of element i of an expert param at step
  // t, i already offset by the expert-parallel rank (i + e*P): the samples
  // of its expert-parallel group, in increasing b.
  static float ExpertRankGradient(int64_t i, int64_t t, int64_t global_batch,
                                  int world, int expert_parallel, int rank);
  // 0.02 * cos(0.0007 * i), rounded to fp32.
  static float InitialValue(int64_t i);

 private:
  const Options options_;
  const int expert_parallel_;     // options_.expert_parallel, at least 1
  std::vector<int64_t> offsets_;  // first global element index per param
  std::vector<int64_t> numels_;
  std::vector<bool> expert_;
  int64_t expert_offset_ = 0;  // e*P of this rank's expert-parallel rank
};

}  // namespace zshard::engine
