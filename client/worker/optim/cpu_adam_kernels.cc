// The CPU AdamW kernels. One loop template, RangeLoop<V>, runs AdamUpdate on
// lanes of type V: float for the scalar path and GCC vector types for the
// SIMD paths, so every path executes the same source expression. The AVX2
// and AVX-512 instantiations live in functions compiled for those targets
// (target attributes), chosen at run time, so the binary still runs on plain
// x86-64. This file is built with -ffp-contract=off: no path fuses
// multiply-adds, and all paths give bit-identical results.
#include "client/worker/optim/cpu_adam_kernels.h"

#include <cstring>
#include <type_traits>

#include "client/worker/optim/float_bits.h"

#define ZSHARD_ALWAYS_INLINE inline __attribute__((always_inline))

namespace zshard::optim {
namespace {

typedef float V4f __attribute__((vector_size(16)));
typedef uint32_t V4u __attribute__((vector_size(16)));
typedef uint16_t V4h __attribute__((vector_size(8)));
typedef float V8f __attribute__((vector_size(32)));
typedef uint32_t V8u __attribute__((vector_size(32)));
typedef uint16_t V8h __attribute__((vector_size(16)));
typedef float V16f __attribute__((vector_size(64)));
typedef uint32_t V16u __attribute__((vector_size(64)));
typedef uint16_t V16h __attribute__((vector_size(32)));

// Lane geometry of a float vector type: its bit and 16-bit vector types.
template <typename V>
struct VecInfo;
template <>
struct VecInfo<V4f> {
  using Bits = V4u;
  using Half = V4h;
};
template <>
struct VecInfo<V8f> {
  using Bits = V8u;
  using Half = V8h;
};
template <>
struct VecInfo<V16f> {
  using Bits = V16u;
  using Half = V16h;
};

template <typename V>
constexpr int kLanes = sizeof(V) / sizeof(float);

}  // namespace

// SIMD lane traits and square roots for the vector types: the formula and
// the bf16 conversions instantiate on these.
template <typename V>
struct VecLaneTraits {
  using Bits = typename VecInfo<V>::Bits;
  static ZSHARD_ALWAYS_INLINE Bits ToBits(V x) { return (Bits)x; }
  static ZSHARD_ALWAYS_INLINE V FromBits(Bits b) { return (V)b; }
  static ZSHARD_ALWAYS_INLINE Bits GreaterMask(Bits a, uint32_t limit) {
    return (Bits)(a > limit);
  }
};
template <>
struct LaneTraits<V4f> : VecLaneTraits<V4f> {};
template <>
struct LaneTraits<V8f> : VecLaneTraits<V8f> {};
template <>
struct LaneTraits<V16f> : VecLaneTraits<V16f> {};

// The lane loop compiles to one vector square root (sqrtps) per vector.
template <typename V>
struct VecSqrt {
  static ZSHARD_ALWAYS_INLINE V Sqrt(V x) {
    V r;
    for (int i = 0; i < kLanes<V>; ++i) r[i] = __builtin_sqrtf(x[i]);
    return r;
  }
};
template <>
struct AdamMath<V4f> : VecSqrt<V4f> {};
template <>
struct AdamMath<V8f> : VecSqrt<V8f> {};
template <>
struct AdamMath<V16f> : VecSqrt<V16f> {};

namespace {

using plan::DType;

// Loads and stores of L consecutive elements as lane type V.
template <typename V>
struct Io {
  using Bits = typename VecInfo<V>::Bits;
  using Half = typename VecInfo<V>::Half;
  static ZSHARD_ALWAYS_INLINE V LoadF32(const float* p) {
    V x;
    memcpy(&x, p, sizeof(V));
    return x;
  }
  static ZSHARD_ALWAYS_INLINE void StoreF32(float* p, V x) {
    memcpy(p, &x, sizeof(V));
  }
  template <DType kT>
  static ZSHARD_ALWAYS_INLINE V Load(const void* base, int64_t i) {
    if constexpr (kT == DType::kFp32) {
      return LoadF32(static_cast<const float*>(base) + i);
    } else {
      Half h;
      memcpy(&h, static_cast<const uint16_t*>(base) + i, sizeof(Half));
      const Bits b = __builtin_convertvector(h, Bits);
      if constexpr (kT == DType::kBf16) {
        return Bf16BitsToFloat<V>(b);
      } else {
        V x;
        for (int k = 0; k < kLanes<V>; ++k) x[k] = HalfBitsToFloat(b[k]);
        return x;
      }
    }
  }
  template <DType kT>
  static ZSHARD_ALWAYS_INLINE void Store(void* base, int64_t i, V x) {
    if constexpr (kT == DType::kFp32) {
      StoreF32(static_cast<float*>(base) + i, x);
    } else {
      Bits b;
      if constexpr (kT == DType::kBf16) {
        b = FloatToBf16Bits<V>(x);
      } else {
        for (int k = 0; k < kLanes<V>; ++k) b[k] = FloatToHalfBits(x[k]);
      }
      const Half h = __builtin_convertvector(b, Half);
      memcpy(static_cast<uint16_t*>(base) + i, &h, sizeof(Half));
    }
  }
};

template <>
struct Io<float> {
  template <DType kT>
  static ZSHARD_ALWAYS_INLINE float Load(const void* base, int64_t i) {
    if constexpr (kT == DType::kFp32) {
      return static_cast<const float*>(base)[i];
    } else if constexpr (kT == DType::kBf16) {
      return Bf16BitsToFloat<float>(static_cast<const uint16_t*>(base)[i]);
    } else {
      return HalfBitsToFloat(static_cast<const uint16_t*>(base)[i]);
    }
  }
  template <DType kT>
  static ZSHARD_ALWAYS_INLINE void Store(void* base, int64_t i, float x) {
    if constexpr (kT == DType::kFp32) {
      static_cast<float*>(base)[i] = x;
    } else if constexpr (kT == DType::kBf16) {
      static_cast<uint16_t*>(base)[i] =
          static_cast<uint16_t>(FloatToBf16Bits<float>(x));
    } else {
      static_cast<uint16_t*>(base)[i] =
          static_cast<uint16_t>(FloatToHalfBits(x));
    }
  }
  static ZSHARD_ALWAYS_INLINE float LoadF32(const float* p) { return *p; }
  static ZSHARD_ALWAYS_INLINE void StoreF32(float* p, float x) { *p = x; }
};

// Elements [i, end) of the slice: whole vectors of V, then the tail one
// float at a time through the same formula. The scalars and pointers are
// copied to locals so the stores cannot alias them (no reloads per vector).
template <typename V, DType kG, DType kP>
ZSHARD_ALWAYS_INLINE void RangeLoop(const AdamStepParams& step,
                                    const AdamSlice& a, int64_t i, int64_t end,
                                    float decay) {
  const AdamStepParams s = step;
  float* const master_p = a.master;
  float* const m_p = a.m;
  float* const v_p = a.v;
  const void* const grad_p = a.grad;
  void* const param_p = a.param;
  if constexpr (!std::is_same_v<V, float>) {
    constexpr int kL = kLanes<V>;
    for (; i + kL <= end; i += kL) {
      V master = Io<V>::LoadF32(master_p + i);
      V m = Io<V>::LoadF32(m_p + i);
      V v = Io<V>::LoadF32(v_p + i);
      const V g = Io<V>::template Load<kG>(grad_p, i);
      AdamUpdate<V>(s, decay, g, master, m, v);
      Io<V>::StoreF32(master_p + i, master);
      Io<V>::StoreF32(m_p + i, m);
      Io<V>::StoreF32(v_p + i, v);
      Io<V>::template Store<kP>(param_p, i, master);
    }
  }
  for (; i < end; ++i) {
    float master = master_p[i];
    float m = m_p[i];
    float v = v_p[i];
    const float g = Io<float>::template Load<kG>(grad_p, i);
    AdamUpdate<float>(s, decay, g, master, m, v);
    master_p[i] = master;
    m_p[i] = m;
    v_p[i] = v;
    Io<float>::template Store<kP>(param_p, i, master);
  }
}

template <typename V, DType kG>
ZSHARD_ALWAYS_INLINE void DispatchParam(const AdamStepParams& s,
                                        const AdamSlice& a, int64_t begin,
                                        int64_t end, float decay) {
  switch (a.param_dtype) {
    case DType::kBf16:
      return RangeLoop<V, kG, DType::kBf16>(s, a, begin, end, decay);
    case DType::kFp16:
      return RangeLoop<V, kG, DType::kFp16>(s, a, begin, end, decay);
    case DType::kFp32:
      return RangeLoop<V, kG, DType::kFp32>(s, a, begin, end, decay);
  }
}

template <typename V>
ZSHARD_ALWAYS_INLINE void Dispatch(const AdamStepParams& s, const AdamSlice& a,
                                   int64_t begin, int64_t end, float decay) {
  switch (a.grad_dtype) {
    case DType::kBf16:
      return DispatchParam<V, DType::kBf16>(s, a, begin, end, decay);
    case DType::kFp16:
      return DispatchParam<V, DType::kFp16>(s, a, begin, end, decay);
    case DType::kFp32:
      return DispatchParam<V, DType::kFp32>(s, a, begin, end, decay);
  }
}

void KernelScalar(const AdamStepParams& s, const AdamSlice& a, int64_t begin,
                  int64_t end, float decay) {
  Dispatch<float>(s, a, begin, end, decay);
}

void KernelVec128(const AdamStepParams& s, const AdamSlice& a, int64_t begin,
                  int64_t end, float decay) {
  Dispatch<V4f>(s, a, begin, end, decay);
}

#if defined(__x86_64__)
__attribute__((target("avx2"))) void KernelAvx2(const AdamStepParams& s,
                                                const AdamSlice& a,
                                                int64_t begin, int64_t end,
                                                float decay) {
  Dispatch<V8f>(s, a, begin, end, decay);
}

__attribute__((target("avx512f,avx512bw"))) void KernelAvx512(
    const AdamStepParams& s, const AdamSlice& a, int64_t begin, int64_t end,
    float decay) {
  Dispatch<V16f>(s, a, begin, end, decay);
}
#endif

}  // namespace

const char* CpuAdamPathName(CpuAdamPath path) {
  switch (path) {
    case CpuAdamPath::kAuto:
      return "auto";
    case CpuAdamPath::kScalar:
      return "scalar";
    case CpuAdamPath::kVec128:
      return "vec128";
    case CpuAdamPath::kAvx2:
      return "avx2";
    case CpuAdamPath::kAvx512:
      return "avx512";
  }
  return "unknown";
}

bool CpuAdamPathSupported(CpuAdamPath path) {
  switch (path) {
    case CpuAdamPath::kAuto:
    case CpuAdamPath::kScalar:
    case CpuAdamPath::kVec128:
      return true;
#if defined(__x86_64__)
    case CpuAdamPath::kAvx2:
      return __builtin_cpu_supports("avx2");
    case CpuAdamPath::kAvx512:
      return __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("avx512bw");
#else
    case CpuAdamPath::kAvx2:
    case CpuAdamPath::kAvx512:
      return false;
#endif
  }
  return false;
}

CpuAdamPath ResolveCpuAdamPath(CpuAdamPath path) {
  if (path != CpuAdamPath::kAuto) return path;
  for (CpuAdamPath p : {CpuAdamPath::kAvx512, CpuAdamPath::kAvx2}) {
    if (CpuAdamPathSupported(p)) return p;
  }
  return CpuAdamPath::kVec128;
}

void RunCpuAdamKernel(CpuAdamPath path, const AdamStepParams& s,
                      const AdamSlice& slice, int64_t begin, int64_t end,
                      float decay) {
  switch (path) {
    case CpuAdamPath::kScalar:
      return KernelScalar(s, slice, begin, end, decay);
#if defined(__x86_64__)
    case CpuAdamPath::kAvx2:
      return KernelAvx2(s, slice, begin, end, decay);
    case CpuAdamPath::kAvx512:
      return KernelAvx512(s, slice, begin, end, decay);
#endif
    default:
      return KernelVec128(s, slice, begin, end, decay);
  }
}

}  // namespace zshard::optim
