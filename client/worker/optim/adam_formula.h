// The AdamW update of one element, written once: the CPU kernels call it on
// floats and on SIMD vectors of floats, the CUDA kernel calls it on device,
// and nothing else in the tree implements the update. PyTorch AdamW
// semantics: decoupled weight decay, bias correction, eps outside the sqrt.
#pragma once

#include <cmath>
#include <cstdint>

#include "client/worker/optim/hd.h"

namespace zshard::optim {

// The per-step scalars, derived once on the host from the hyperparameters,
// the step number and the gradient scale (see MakeAdamStepParams in adam.h).
struct AdamStepParams {
  int64_t step = 1;         // 1-based step number t
  float grad_scale = 1.0f;  // (1 / grad divisor) * clip coefficient
  float beta1 = 0.9f;
  float one_minus_beta1 = 0.1f;
  float beta2 = 0.999f;
  float one_minus_beta2 = 0.001f;
  float step_size = 1e-3f;             // lr / (1 - beta1^t)
  float bias_correction2_sqrt = 1.0f;  // sqrt(1 - beta2^t)
  float eps = 1e-8f;
  float decay = 1.0f;  // 1 - lr * weight_decay (pieces with weight decay)
};

// Square root per lane. The generic version serves host scalars (float,
// double, long double); the CPU kernels specialise it for SIMD vectors.
template <typename T>
struct AdamMath {
  static inline T Sqrt(T x) { return std::sqrt(x); }
};

template <>
struct AdamMath<float> {
  static ZSHARD_HD_INLINE float Sqrt(float x) {
#if defined(__CUDA_ARCH__)
    return sqrtf(x);
#else
    return __builtin_sqrtf(x);
#endif
  }
};

// One AdamW step of one element (or one SIMD vector of elements), in place:
//   g      = grad * grad_scale
//   master = master * decay            (decay = 1 without weight decay)
//   m      = beta1 * m + (1 - beta1) * g
//   v      = beta2 * v + (1 - beta2) * g * g
//   master = master - step_size * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// `decay` is s.decay for pieces with weight decay and 1 for the others.
// The operation order follows torch.optim.AdamW, so the rounding does too
// (up to fused multiply-adds, which the kernels' builds disable).
template <typename T>
ZSHARD_HD_INLINE void AdamUpdate(const AdamStepParams& s, float decay, T grad,
                                 T& master, T& m, T& v) {
  const T g = grad * s.grad_scale;
  master = master * decay;
  m = m * s.beta1 + g * s.one_minus_beta1;
  v = v * s.beta2 + (g * g) * s.one_minus_beta2;
  const T denom = AdamMath<T>::Sqrt(v) / s.bias_correction2_sqrt + s.eps;
  master = master - (m / denom) * s.step_size;
}

}  // namespace zshard::optim
