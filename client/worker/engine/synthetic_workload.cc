// SyntheticWorkload: the closed-form gradients and initial params.
#include "client/worker/engine/synthetic_workload.h"

#include <cmath>

#include "common/status.h"

namespace zshard::engine {

SyntheticWorkload::SyntheticWorkload(const plan::ModelSpec& model,
                                     const Options& options)
    : options_(options) {
  int64_t offset = 0;
  for (const plan::ParamSpec& p : model.params) {
    offsets_.push_back(offset);
    numels_.push_back(p.numel());
    offset += p.numel();
  }
}

float SyntheticWorkload::RankGradient(int64_t i, int64_t t,
                                      int64_t global_batch, int world,
                                      int rank) {
  float sum = 0.0f;
  for (int64_t b = rank; b < global_batch; b += world) {
    sum += static_cast<float>(0.01 * std::sin(0.001 * static_cast<double>(i) +
                                              0.37 * static_cast<double>(t) +
                                              0.11 * static_cast<double>(b)));
  }
  return sum;
}

float SyntheticWorkload::InitialValue(int64_t i) {
  return static_cast<float>(0.02 * std::cos(0.0007 * static_cast<double>(i)));
}

void SyntheticWorkload::InitialParam(int p, absl::Span<float> out) const {
  for (size_t j = 0; j < out.size(); ++j) {
    out[j] = InitialValue(offsets_[p] + static_cast<int64_t>(j));
  }
}

absl::StatusOr<double> SyntheticWorkload::Gradients(int64_t step,
                                                    ModelState& state) {
  std::vector<float> values;
  for (size_t p = 0; p < numels_.size(); ++p) {
    values.resize(numels_[p]);
    for (int64_t j = 0; j < numels_[p]; ++j) {
      values[j] = RankGradient(offsets_[p] + j, step, options_.global_batch,
                               options_.world, options_.rank);
    }
    ZSHARD_RETURN_IF_ERROR(state.WriteGrad(static_cast<int>(p), values));
  }
  return 0.0;
}

}  // namespace zshard::engine
