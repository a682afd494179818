// SyntheticWorkload: the closed-form gradients and initial params.
#include "client/worker/engine/synthetic_workload.h"

#include <cmath>

#include "common/status.h"

namespace zshard::engine {
namespace {

float Sample(int64_t i, int64_t t, int64_t b) {
  return static_cast<float>(0.01 * std::sin(0.001 * static_cast<double>(i) +
                                            0.37 * static_cast<double>(t) +
                                            0.11 * static_cast<double>(b)));
}

}  // namespace

SyntheticWorkload::SyntheticWorkload(const plan::ModelSpec& model,
                                     const Options& options)
    : options_(options),
      expert_parallel_(options.expert_parallel > 0 ? options.expert_parallel
                                                   : 1) {
  int64_t offset = 0;
  for (const plan::ParamSpec& p : model.params) {
    offsets_.push_back(offset);
    numels_.push_back(p.numel());
    expert_.push_back(p.expert);
    offset += p.numel();
  }
  expert_offset_ =
      static_cast<int64_t>(options.rank % expert_parallel_) * offset;
}

float SyntheticWorkload::RankGradient(int64_t i, int64_t t,
                                      int64_t global_batch, int world,
                                      int rank) {
  float sum = 0.0f;
  for (int64_t b = rank; b < global_batch; b += world) sum += Sample(i, t, b);
  return sum;
}

float SyntheticWorkload::ExpertRankGradient(int64_t i, int64_t t,
                                            int64_t global_batch, int world,
                                            int expert_parallel, int rank) {
  // The group's samples: b = q*W + g*E + j for j in [0, E), increasing.
  const int64_t first = int64_t{rank / expert_parallel} * expert_parallel;
  float sum = 0.0f;
  for (int64_t base = first; base < global_batch; base += world) {
    for (int64_t b = base; b < base + expert_parallel && b < global_batch;
         ++b) {
      sum += Sample(i, t, b);
    }
  }
  return sum;
}

float SyntheticWorkload::InitialValue(int64_t i) {
  return static_cast<float>(0.02 * std::cos(0.0007 * static_cast<double>(i)));
}

void SyntheticWorkload::InitialParam(int p, absl::Span<float> out) const {
  const int64_t first = offsets_[p] + (expert_[p] ? expert_offset_ : 0);
  for (size_t j = 0; j < out.size(); ++j) {
    out[j] = InitialValue(first + static_cast<int64_t>(j));
  }
}

absl::StatusOr<double> SyntheticWorkload::Gradients(int64_t step,
                                                    ModelState& state) {
  const Options& o = options_;
  std::vector<float> values;
  for (size_t p = 0; p < numels_.size(); ++p) {
    values.resize(numels_[p]);
    if (expert_[p]) {
      for (int64_t j = 0; j < numels_[p]; ++j) {
        values[j] = ExpertRankGradient(offsets_[p] + expert_offset_ + j, step,
                                       o.global_batch, o.world,
                                       expert_parallel_, o.rank);
      }
    } else {
      for (int64_t j = 0; j < numels_[p]; ++j) {
        values[j] = RankGradient(offsets_[p] + j, step, o.global_batch, o.world,
                                 o.rank);
      }
    }
    ZSHARD_RETURN_IF_ERROR(state.WriteGrad(static_cast<int>(p), values));
  }
  return 0.0;
}

}  // namespace zshard::engine
