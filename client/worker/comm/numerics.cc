// Conversions and the fp32-accumulating reduction kernel.
#include "client/worker/comm/numerics.h"

#include <algorithm>
#include <cstring>

#include "client/worker/optim/float_bits.h"

namespace zshard::comm {
namespace {

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
// conversions done over whole tiles of uint32 bit patterns (shifts, adds and
// a branch-free select) so that they vectorise; per-element bit casts keep
// the generic loop scalar, several times slower than the network on the bf16
// reduce-scatter.
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
      o[base + i] =
          static_cast<uint16_t>(optim::Fp32BitsToBf16Bits<float>(bits[i]));
    }
  }
}

}  // namespace

// The conversions are optim/float_bits.h's, the one rounding rule shared by
// the host, the Adam kernels and the device.
float Bf16ToFloat(uint16_t bits) { return optim::Bf16BitsToFloat<float>(bits); }

uint16_t FloatToBf16(float value) {
  return static_cast<uint16_t>(optim::FloatToBf16Bits(value));
}

float Fp16ToFloat(uint16_t bits) { return optim::HalfBitsToFloat(bits); }

uint16_t FloatToFp16(float value) {
  return static_cast<uint16_t>(optim::FloatToHalfBits(value));
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
