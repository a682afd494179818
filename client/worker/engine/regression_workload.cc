// RegressionWorkload: generated data, forward and backward of the MLP.
#include "client/worker/engine/regression_workload.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/status.h"

namespace zshard::engine {
namespace {

constexpr int kFc1W = 0, kFc1B = 1, kFc2W = 2, kFc2B = 3;

// A uniform value in [-1, 1) from (seed, stream, index): splitmix64.
float Uniform(uint64_t seed, uint64_t stream, uint64_t index) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + stream * 0xBF58476D1CE4E5B9ull +
               index * 0x94D049BB133111EBull + 0x2545F4914F6CDD1Dull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<float>(static_cast<double>(z >> 11) * 0x1.0p-53 * 2.0 -
                            1.0);
}

}  // namespace

RegressionWorkload::RegressionWorkload(const Options& options)
    : options_(options) {}

void RegressionWorkload::InitialParam(int p, absl::Span<float> out) const {
  const MlpShape& s = options_.shape;
  const int fan_in = p == kFc1W ? s.inputs : s.hidden;
  const float bound = 1.0f / std::sqrt(static_cast<float>(fan_in));
  for (size_t j = 0; j < out.size(); ++j) {
    out[j] = (p == kFc1W || p == kFc2W)
                 ? bound * Uniform(options_.seed, 10 + p, j)
                 : 0.0f;
  }
}

absl::StatusOr<double> RegressionWorkload::Gradients(int64_t step,
                                                     ModelState& state) {
  const MlpShape& s = options_.shape;
  ZSHARD_ASSIGN_OR_RETURN(const std::vector<float> w1, state.ReadParam(kFc1W));
  ZSHARD_ASSIGN_OR_RETURN(const std::vector<float> b1, state.ReadParam(kFc1B));
  ZSHARD_ASSIGN_OR_RETURN(const std::vector<float> w2, state.ReadParam(kFc2W));
  ZSHARD_ASSIGN_OR_RETURN(const std::vector<float> b2, state.ReadParam(kFc2B));
  std::vector<float> gw1(w1.size(), 0.0f), gb1(b1.size(), 0.0f);
  std::vector<float> gw2(w2.size(), 0.0f), gb2(b2.size(), 0.0f);
  std::vector<float> x(s.inputs), h(s.hidden), dh(s.hidden), dy(s.outputs);
  const float teacher_scale = 1.0f / std::sqrt(static_cast<float>(s.inputs));
  double loss = 0.0;
  for (int64_t b = options_.rank; b < options_.global_batch;
       b += options_.world) {
    const uint64_t sample =
        static_cast<uint64_t>(step) * options_.global_batch + b;
    for (int k = 0; k < s.inputs; ++k) {
      x[k] = Uniform(options_.seed, 1, sample * s.inputs + k);
    }
    for (int u = 0; u < s.hidden; ++u) {
      float a = b1[u];
      for (int k = 0; k < s.inputs; ++k) a += w1[u * s.inputs + k] * x[k];
      h[u] = std::max(a, 0.0f);
    }
    for (int o = 0; o < s.outputs; ++o) {
      // The teacher: a fixed linear map of x plus a fixed nonlinearity.
      float target = 0.5f * std::fabs(x[o % s.inputs]);
      for (int k = 0; k < s.inputs; ++k) {
        target +=
            teacher_scale * Uniform(options_.seed, 2, o * s.inputs + k) * x[k];
      }
      float y = b2[o];
      for (int u = 0; u < s.hidden; ++u) y += w2[o * s.hidden + u] * h[u];
      dy[o] = y - target;
      loss += 0.5 * static_cast<double>(dy[o]) * dy[o];
    }
    std::fill(dh.begin(), dh.end(), 0.0f);
    for (int o = 0; o < s.outputs; ++o) {
      gb2[o] += dy[o];
      for (int u = 0; u < s.hidden; ++u) {
        gw2[o * s.hidden + u] += dy[o] * h[u];
        dh[u] += dy[o] * w2[o * s.hidden + u];
      }
    }
    for (int u = 0; u < s.hidden; ++u) {
      if (h[u] <= 0.0f) continue;
      gb1[u] += dh[u];
      for (int k = 0; k < s.inputs; ++k) gw1[u * s.inputs + k] += dh[u] * x[k];
    }
  }
  ZSHARD_RETURN_IF_ERROR(state.WriteGrad(kFc1W, gw1));
  ZSHARD_RETURN_IF_ERROR(state.WriteGrad(kFc1B, gb1));
  ZSHARD_RETURN_IF_ERROR(state.WriteGrad(kFc2W, gw2));
  ZSHARD_RETURN_IF_ERROR(state.WriteGrad(kFc2B, gb2));
  return loss;
}

}  // namespace zshard::engine
