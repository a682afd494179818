// Conversions between fp32 and the 16-bit float formats (bf16, fp16) as bit
// patterns, written once for the host, the device and SIMD vectors: every
// function takes a "lane" type F (float, or a SIMD vector of floats) whose
// LaneTraits say how to reinterpret it as 32-bit unsigned integers.
#pragma once

#include <cstdint>
#include <cstring>

#include "client/worker/optim/hd.h"

namespace zshard::optim {

// How a lane type is viewed as bits. Specialised here for float; the CPU
// kernels specialise it for their SIMD vector types. Bits holds one 32-bit
// unsigned integer per lane.
template <typename F>
struct LaneTraits;

template <>
struct LaneTraits<float> {
  using Bits = uint32_t;
  static ZSHARD_HD_INLINE Bits ToBits(float x) {
    Bits b;
    memcpy(&b, &x, sizeof(b));
    return b;
  }
  static ZSHARD_HD_INLINE float FromBits(Bits b) {
    float x;
    memcpy(&x, &b, sizeof(x));
    return x;
  }
  // All ones where a > limit, else zero.
  static ZSHARD_HD_INLINE Bits GreaterMask(Bits a, uint32_t limit) {
    return a > limit ? ~Bits{0} : Bits{0};
  }
};

// bf16 bits (in the low 16 bits of each lane) -> fp32. Exact.
template <typename F>
ZSHARD_HD_INLINE F Bf16BitsToFloat(typename LaneTraits<F>::Bits h) {
  return LaneTraits<F>::FromBits(h << 16);
}

// fp32 bit patterns -> bf16 bits (in the low 16 bits of each lane), round
// to nearest even. Infinities stay infinite, finite values past the bf16
// range round to infinity, and NaN stays NaN (quieted, sign and top payload
// kept). Branch-free, so that loops over arrays of bits vectorise.
template <typename F>
ZSHARD_HD_INLINE typename LaneTraits<F>::Bits Fp32BitsToBf16Bits(
    typename LaneTraits<F>::Bits b) {
  using L = LaneTraits<F>;
  using Bits = typename L::Bits;
  const Bits rounded = (b + 0x7FFFu + ((b >> 16) & 1u)) >> 16;
  const Bits quiet_nan = (b >> 16) | 0x40u;
  const Bits is_nan = L::GreaterMask(b & 0x7FFFFFFFu, 0x7F800000u);
  return (quiet_nan & is_nan) | (rounded & ~is_nan);
}

// fp32 -> bf16 bits (in the low 16 bits of each lane), as
// Fp32BitsToBf16Bits.
template <typename F>
ZSHARD_HD_INLINE typename LaneTraits<F>::Bits FloatToBf16Bits(F x) {
  return Fp32BitsToBf16Bits<F>(LaneTraits<F>::ToBits(x));
}

// fp16 bits -> fp32 (scalar). Exact, subnormals included.
ZSHARD_HD_INLINE float HalfBitsToFloat(uint32_t h) {
  using L = LaneTraits<float>;
  const uint32_t shifted_exp = 0x7C00u << 13;
  uint32_t o = (h & 0x7FFFu) << 13;
  const uint32_t exp = shifted_exp & o;
  o += (127u - 15u) << 23;
  if (exp == shifted_exp) {  // inf or NaN
    o += (128u - 16u) << 23;
  } else if (exp == 0) {  // zero or subnormal: renormalise in fp32
    o += 1u << 23;
    o = L::ToBits(L::FromBits(o) - L::FromBits(113u << 23));
  }
  return L::FromBits(o | ((h & 0x8000u) << 16));
}

// fp32 -> fp16 bits (scalar), round to nearest even; overflow goes to
// infinity, NaN to a quiet NaN.
ZSHARD_HD_INLINE uint32_t FloatToHalfBits(float x) {
  using L = LaneTraits<float>;
  uint32_t u = L::ToBits(x);
  const uint32_t sign = u & 0x80000000u;
  u ^= sign;
  uint32_t o;
  if (u >= ((127u + 16u) << 23)) {  // at least 2^16: inf or NaN
    o = u > 0x7F800000u ? 0x7E00u : 0x7C00u;
  } else if (u < (113u << 23)) {  // fp16 subnormal or zero
    // Adding the magic value aligns the 10 mantissa bits at the bottom;
    // the fp32 addition does the round to nearest even.
    const uint32_t magic = ((127u - 15u) + (23u - 10u) + 1u) << 23;
    o = L::ToBits(L::FromBits(u) + L::FromBits(magic)) - magic;
  } else {
    const uint32_t mant_odd = (u >> 13) & 1u;
    u += ((15u - 127u) << 23) + 0xFFFu;
    u += mant_odd;
    o = u >> 13;
  }
  return o | (sign >> 16);
}

// x * factor for a finite factor, with a NaN x kept as x86 keeps it: the
// same NaN, quieted (sign and payload kept). A GPU's multiply would return
// its one canonical NaN instead, so the host and the device call this to
// give the same bits for a non-finite gradient too.
ZSHARD_HD_INLINE float ScaleKeepingNan(float x, float factor) {
  using L = LaneTraits<float>;
  const uint32_t b = L::ToBits(x);
  return (b & 0x7FFFFFFFu) > 0x7F800000u ? L::FromBits(b | 0x00400000u)
                                         : x * factor;
}

}  // namespace zshard::optim
