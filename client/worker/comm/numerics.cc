// Conversions and the fp32-accumulating reduction kernel.
#include "client/worker/comm/numerics.h"

#include <algorithm>
#include <cstring>

namespace zshard::comm {
namespace {

uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

float BitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// Elements per accumulation tile: small enough for the fp32 tile to stay in
// L1, large enough for the loops to vectorise.
constexpr size_t kTile = 1024;

template <typename T>
T Combine(ReduceOp op, T a, T b) {
  return op == ReduceOp::kSum ? static_cast<T>(a + b) : std::max(a, b);
}

// Native reduction for types whose arithmetic is exact (integers) or whose
// storage is already fp32.
template <typename T>
void ReduceNative(ReduceOp op, const void* const* inputs, int n, void* out,
                  size_t count) {
  T* o = static_cast<T*>(out);
  for (size_t base = 0; base < count; base += kTile) {
    const size_t len = std::min(kTile, count - base);
    T acc[kTile];
    const T* first = static_cast<const T*>(inputs[0]) + base;
    std::copy(first, first + len, acc);
    for (int k = 1; k < n; ++k) {
      const T* in = static_cast<const T*>(inputs[k]) + base;
      if (op == ReduceOp::kSum) {
        for (size_t i = 0; i < len; ++i)
          acc[i] = static_cast<T>(acc[i] + in[i]);
      } else {
        for (size_t i = 0; i < len; ++i) acc[i] = std::max(acc[i], in[i]);
      }
    }
    std::copy(acc, acc + len, o + base);
  }
}

// 16-bit float reduction: widen each tile to fp32, combine, round once.
template <float (*Widen)(uint16_t), uint16_t (*Narrow)(float)>
void Reduce16(ReduceOp op, const void* const* inputs, int n, void* out,
              size_t count) {
  uint16_t* o = static_cast<uint16_t*>(out);
  for (size_t base = 0; base < count; base += kTile) {
    const size_t len = std::min(kTile, count - base);
    float acc[kTile];
    const uint16_t* first = static_cast<const uint16_t*>(inputs[0]) + base;
    for (size_t i = 0; i < len; ++i) acc[i] = Widen(first[i]);
    for (int k = 1; k < n; ++k) {
      const uint16_t* in = static_cast<const uint16_t*>(inputs[k]) + base;
      if (op == ReduceOp::kSum) {
        for (size_t i = 0; i < len; ++i) acc[i] += Widen(in[i]);
      } else {
        for (size_t i = 0; i < len; ++i)
          acc[i] = std::max(acc[i], Widen(in[i]));
      }
    }
    for (size_t i = 0; i < len; ++i) o[base + i] = Narrow(acc[i]);
  }
}

// bf16 reduction as Reduce16<Bf16ToFloat, FloatToBf16>, with the bit
// conversions written over whole tiles (shifts, adds and a select on uint32
// arrays) so that they vectorise; the scalar conversions' NaN branch and
// per-element bit casts keep the generic loop scalar, several times slower
// than the network on the bf16 reduce-scatter.
void ReduceBf16(ReduceOp op, const void* const* inputs, int n, void* out,
                size_t count) {
  uint16_t* o = static_cast<uint16_t*>(out);
  for (size_t base = 0; base < count; base += kTile) {
    const size_t len = std::min(kTile, count - base);
    float acc[kTile];
    float x[kTile];
    uint32_t bits[kTile];
    const uint16_t* first = static_cast<const uint16_t*>(inputs[0]) + base;
    for (size_t i = 0; i < len; ++i) bits[i] = uint32_t{first[i]} << 16;
    std::memcpy(acc, bits, len * sizeof(float));
    for (int k = 1; k < n; ++k) {
      const uint16_t* in = static_cast<const uint16_t*>(inputs[k]) + base;
      for (size_t i = 0; i < len; ++i) bits[i] = uint32_t{in[i]} << 16;
      std::memcpy(x, bits, len * sizeof(float));
      if (op == ReduceOp::kSum) {
        for (size_t i = 0; i < len; ++i) acc[i] += x[i];
      } else {
        for (size_t i = 0; i < len; ++i) acc[i] = std::max(acc[i], x[i]);
      }
    }
    std::memcpy(bits, acc, len * sizeof(float));
    for (size_t i = 0; i < len; ++i) {
      const uint32_t u = bits[i];
      const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
      const uint32_t quiet_nan = (u >> 16) | 0x0040u;
      o[base + i] = static_cast<uint16_t>(
          (u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
    }
  }
}

}  // namespace

float Bf16ToFloat(uint16_t bits) {
  return BitsFloat(static_cast<uint32_t>(bits) << 16);
}

uint16_t FloatToBf16(float value) {
  const uint32_t u = FloatBits(value);
  if ((u & 0x7fffffffu) > 0x7f800000u) {
    return static_cast<uint16_t>((u >> 16) | 0x0040u);  // quiet NaN
  }
  const uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + rounding) >> 16);
}

float Fp16ToFloat(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exp = (bits >> 10) & 0x1fu;
  const uint32_t mant = bits & 0x3ffu;
  if (exp == 0x1f) return BitsFloat(sign | 0x7f800000u | (mant << 13));
  if (exp != 0) return BitsFloat(sign | ((exp + 112) << 23) | (mant << 13));
  // Subnormal (or zero): mant * 2^-24, exact in fp32.
  const float magnitude = static_cast<float>(mant) * 5.9604644775390625e-8f;
  return sign ? -magnitude : magnitude;
}

uint16_t FloatToFp16(float value) {
  const uint32_t u = FloatBits(value);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00u;   // NaN
  if (abs >= 0x477ff000u) return sign | 0x7c00u;  // rounds to >= 65520: inf
  if (abs >= 0x38800000u) {                       // normal in fp16
    const uint32_t rounding = 0xfffu + ((abs >> 13) & 1u);
    return sign | static_cast<uint16_t>((abs - 0x38000000u + rounding) >> 13);
  }
  // Subnormal or zero: round |value| / 2^-24 to the nearest even integer.
  const float scaled = BitsFloat(abs) * 16777216.0f;  // exact
  const float r = scaled + 8388608.0f - 8388608.0f;   // ties to even
  return sign | static_cast<uint16_t>(r);
}

void ReduceInto(DataType dtype, ReduceOp op, const void* const* inputs,
                int num_inputs, void* out, size_t count) {
  switch (dtype) {
    case DataType::kFp32:
      return ReduceNative<float>(op, inputs, num_inputs, out, count);
    case DataType::kInt64:
      return ReduceNative<int64_t>(op, inputs, num_inputs, out, count);
    case DataType::kUint8:
      return ReduceNative<uint8_t>(op, inputs, num_inputs, out, count);
    case DataType::kBf16:
      return ReduceBf16(op, inputs, num_inputs, out, count);
    case DataType::kFp16:
      return Reduce16<Fp16ToFloat, FloatToFp16>(op, inputs, num_inputs, out,
                                                count);
  }
}

}  // namespace zshard::comm
