// An independent long-double AdamW and 16-bit rounding reference for the
// optim tests, written in the textbook form (m_hat, v_hat) and with libm
// rounding, sharing no code with client/worker/optim.
#pragma once

#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace zshard::optim::testing {

struct RefHyper {
  long double lr = 1e-3L;
  long double beta1 = 0.9L;
  long double beta2 = 0.999L;
  long double eps = 1e-8L;
  long double weight_decay = 0.0L;
};

struct RefState {
  long double p;
  long double m;
  long double v;
};

// One AdamW step (PyTorch semantics) of one element at 1-based step t.
inline RefState RefAdamW(const RefHyper& h, bool decay, long long t,
                         long double grad_scale, long double grad, RefState s) {
  const long double g = grad * grad_scale;
  if (decay) s.p -= h.lr * h.weight_decay * s.p;
  s.m = h.beta1 * s.m + (1 - h.beta1) * g;
  s.v = h.beta2 * s.v + (1 - h.beta2) * g * g;
  const long double m_hat = s.m / (1 - std::pow(h.beta1, (long double)t));
  const long double v_hat = s.v / (1 - std::pow(h.beta2, (long double)t));
  s.p -= h.lr * m_hat / (std::sqrt(v_hat) + h.eps);
  return s;
}

// Rounds x to the nearest value with `mant_bits` significant bits, exponent
// at least `min_exp` (below it: fixed quantum, i.e. subnormals), ties to
// even; past `max_finite` (after rounding) it is infinite.
inline long double RefRound(long double x, int mant_bits, int min_exp,
                            long double max_finite) {
  if (std::isnan(x) || std::isinf(x) || x == 0) return x;
  int e;
  std::frexp(x, &e);  // |x| in [2^(e-1), 2^e)
  const int exp = std::max(e - 1, min_exp);
  const long double quantum = std::ldexp(1.0L, exp - (mant_bits - 1));
  std::fesetround(FE_TONEAREST);
  const long double r = std::nearbyint(x / quantum) * quantum;
  if (std::fabs(r) > max_finite) {
    return std::copysign(std::numeric_limits<long double>::infinity(), x);
  }
  return r;
}

// The bf16 value nearest to x (8 significant bits, fp32's exponent range).
inline long double RefRoundBf16(float x) {
  return RefRound(x, 8, -126, 0x1.FEp127L);
}

// The fp16 value nearest to x (11 significant bits, min normal 2^-14).
inline long double RefRoundFp16(float x) {
  return RefRound(x, 11, -14, 65504.0L);
}

inline float FloatFromBf16(uint16_t h) {
  const uint32_t b = uint32_t{h} << 16;
  float f;
  std::memcpy(&f, &b, sizeof(f));
  return f;
}

// fp16 bits decoded arithmetically.
inline long double FloatFromFp16(uint16_t h) {
  const int sign = (h >> 15) ? -1 : 1;
  const int exp = (h >> 10) & 0x1F;
  const int mant = h & 0x3FF;
  if (exp == 0x1F) {
    return mant ? std::numeric_limits<long double>::quiet_NaN()
                : sign * std::numeric_limits<long double>::infinity();
  }
  if (exp == 0) return sign * std::ldexp((long double)mant, -24);
  return sign * std::ldexp((long double)(1024 + mant), exp - 25);
}

}  // namespace zshard::optim::testing
