// Shared pieces of the optim tests: random optimizer states and the
// tolerance of one fp32 AdamW step against the long-double reference.
#pragma once

#include <cmath>
#include <random>

#include "client/worker/optim/adam.h"
#include "tests/worker/optim/adam_reference.h"

namespace zshard::optim::testing {

// A random element state spanning many magnitudes, with v small enough in
// places that eps matters.
struct RandomState {
  float master, m, v, grad;
};

inline RandomState MakeRandomState(std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> decade(-6.0f, 0.0f);
  RandomState s;
  s.master = 0.05f * normal(rng);
  s.grad = normal(rng) * std::pow(10.0f, decade(rng) / 2);
  s.m = 0.1f * normal(rng) * std::pow(10.0f, decade(rng) / 2);
  const float root_v = normal(rng) * std::pow(10.0f, decade(rng) / 2 - 1);
  s.v = root_v * root_v;
  return s;
}

inline RefHyper ToRef(const AdamHyper& h) {
  return {h.lr, h.beta1, h.beta2, h.eps, h.weight_decay};
}

// Bounds of the fp32 rounding error of one step, relative to the magnitudes
// the step combines (cancellations make plain relative errors meaningless).
struct Tolerance {
  long double master, m, v;
};

inline Tolerance StepTolerance(const AdamHyper& h, long long t, long double g,
                               const RandomState& in, const RefState& ref) {
  constexpr long double kRel = 1e-5L;  // about 80 fp32 ulps
  const long double m_scale =
      h.beta1 * std::fabs((long double)in.m) + (1 - h.beta1) * std::fabs(g);
  const long double v_scale = h.beta2 * in.v + (1 - h.beta2) * g * g;
  const long double bc1 = 1 - std::pow((long double)h.beta1, (long double)t);
  const long double bc2 = 1 - std::pow((long double)h.beta2, (long double)t);
  const long double update =
      h.lr * (m_scale / bc1) / (std::sqrt(ref.v / bc2) + h.eps);
  return {kRel * (std::fabs((long double)in.master) + update) + 1e-30L,
          kRel * m_scale + 1e-30L, kRel * v_scale + 1e-30L};
}

}  // namespace zshard::optim::testing
