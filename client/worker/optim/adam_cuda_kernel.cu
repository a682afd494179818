// The CUDA AdamW kernel: one flat grid-stride launch over the runs of an
// owned slice, each element updated by AdamUpdate (adam_formula.h), the same
// function the CPU kernels call; four elements a thread in 16- and 8-byte
// accesses where the buffers are aligned for it. Built with IEEE division and
// square root and without fused multiply-adds, so it rounds like the CPU
// kernels.
#include <cuda_runtime.h>

#include "client/worker/optim/adam_cuda_kernel.h"
#include "client/worker/optim/adam_formula.h"
#include "client/worker/optim/float_bits.h"

namespace zshard::optim::cuda_internal {
namespace {

template <ElemType kT>
__device__ __forceinline__ float LoadElem(const void* base, int64_t i) {
  if constexpr (kT == ElemType::kFp32) {
    return static_cast<const float*>(base)[i];
  } else if constexpr (kT == ElemType::kBf16) {
    return Bf16BitsToFloat<float>(static_cast<const uint16_t*>(base)[i]);
  } else {
    return HalfBitsToFloat(static_cast<const uint16_t*>(base)[i]);
  }
}

template <ElemType kT>
__device__ __forceinline__ void StoreElem(void* base, int64_t i, float x) {
  if constexpr (kT == ElemType::kFp32) {
    static_cast<float*>(base)[i] = x;
  } else if constexpr (kT == ElemType::kBf16) {
    static_cast<uint16_t*>(base)[i] =
        static_cast<uint16_t>(FloatToBf16Bits<float>(x));
  } else {
    static_cast<uint16_t*>(base)[i] = static_cast<uint16_t>(FloatToHalfBits(x));
  }
}

// Four consecutive elements 4g..4g+3 in one access: 16 bytes of fp32, 8 of
// a 16-bit format (element 4g in the low half of .x).
template <ElemType kT>
__device__ __forceinline__ void Load4(const void* base, int64_t g,
                                      float out[4]) {
  if constexpr (kT == ElemType::kFp32) {
    const float4 x = static_cast<const float4*>(base)[g];
    out[0] = x.x;
    out[1] = x.y;
    out[2] = x.z;
    out[3] = x.w;
  } else {
    const uint2 x = static_cast<const uint2*>(base)[g];
    const uint32_t halves[4] = {x.x & 0xFFFFu, x.x >> 16, x.y & 0xFFFFu,
                                x.y >> 16};
    for (int e = 0; e < 4; ++e) {
      out[e] = kT == ElemType::kBf16 ? Bf16BitsToFloat<float>(halves[e])
                                     : HalfBitsToFloat(halves[e]);
    }
  }
}

template <ElemType kT>
__device__ __forceinline__ void Store4(void* base, int64_t g,
                                       const float in[4]) {
  if constexpr (kT == ElemType::kFp32) {
    static_cast<float4*>(base)[g] = make_float4(in[0], in[1], in[2], in[3]);
  } else {
    uint32_t h[4];
    for (int e = 0; e < 4; ++e) {
      h[e] = (kT == ElemType::kBf16 ? FloatToBf16Bits<float>(in[e])
                                    : FloatToHalfBits(in[e])) &
             0xFFFFu;
    }
    static_cast<uint2*>(base)[g] =
        make_uint2(h[0] | (h[1] << 16), h[2] | (h[3] << 16));
  }
}

// The runs of one launch, in shared memory.
struct SharedRuns {
  int64_t begin[kMaxLaunchRuns];
  int64_t end[kMaxLaunchRuns];
  float decay[kMaxLaunchRuns];
  int count;

  __device__ void Load(const LaunchRuns& runs) {
    for (int k = threadIdx.x; k < runs.count; k += blockDim.x) {
      begin[k] = runs.begin[k];
      end[k] = runs.end[k];
      decay[k] = runs.decay[k];
    }
    if (threadIdx.x == 0) count = runs.count;
    __syncthreads();
  }
  // The last run that begins at or before i (0 when none does).
  __device__ int Find(int64_t i) const {
    int l = 0, r = count - 1;
    while (l < r) {
      const int mid = (l + r + 1) / 2;
      if (begin[mid] <= i) {
        l = mid;
      } else {
        r = mid - 1;
      }
    }
    return l;
  }
  __device__ bool Covers(int run, int64_t i) const {
    return i >= begin[run] && i < end[run];
  }
};

// One element's update, its param written from the new master.
template <ElemType kG, ElemType kP>
__device__ __forceinline__ void UpdateOne(const LaunchArgs& a, float decay,
                                          int64_t i) {
  float master = a.master[i];
  float m = a.m[i];
  float v = a.v[i];
  const float g = LoadElem<kG>(a.grad, i);
  AdamUpdate<float>(a.step, decay, g, master, m, v);
  a.master[i] = master;
  a.m[i] = m;
  a.v[i] = v;
  StoreElem<kP>(a.param, i, master);
}

// Element by element: any alignment. Elements outside the runs (padding,
// gaps) are neither read nor written.
template <ElemType kG, ElemType kP>
__global__ void AdamKernel(LaunchArgs a, LaunchRuns runs) {
  __shared__ SharedRuns s;
  s.Load(runs);
  const int64_t lo = s.begin[0];
  const int64_t hi = s.end[s.count - 1];
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  int run = 0;  // the run of the previous element: usually this one's too
  for (int64_t i =
           lo + static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < hi; i += stride) {
    if (!s.Covers(run, i)) {
      run = s.Find(i);
      if (!s.Covers(run, i)) continue;  // between runs: padding or uncovered
    }
    UpdateOne<kG, kP>(a, s.decay[run], i);
  }
}

// Four elements a thread at a time, for buffers aligned to four elements
// (master, m and v to 16 bytes): a group inside one run moves in 16- and
// 8-byte accesses, a group a run's edge cuts goes element by element. The
// same AdamUpdate per element, so the bits are the element kernel's.
template <ElemType kG, ElemType kP>
__global__ void AdamKernel4(LaunchArgs a, LaunchRuns runs) {
  __shared__ SharedRuns s;
  s.Load(runs);
  const int64_t lo = s.begin[0];
  const int64_t hi = s.end[s.count - 1];
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  float4* __restrict__ m4 = reinterpret_cast<float4*>(a.m);
  float4* __restrict__ v4 = reinterpret_cast<float4*>(a.v);
  float4* master4 = reinterpret_cast<float4*>(a.master);
  int run = 0;
  for (int64_t g =
           lo / 4 + static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       4 * g < hi; g += stride) {
    const int64_t i0 = 4 * g;
    if (!s.Covers(run, i0)) run = s.Find(i0);
    if (s.Covers(run, i0) && i0 + 4 <= s.end[run]) {
      const float decay = s.decay[run];
      const float4 mv = master4[g];
      const float4 mm = m4[g];
      const float4 vv = v4[g];
      float master[4] = {mv.x, mv.y, mv.z, mv.w};
      float m[4] = {mm.x, mm.y, mm.z, mm.w};
      float v[4] = {vv.x, vv.y, vv.z, vv.w};
      float grad[4];
      Load4<kG>(a.grad, g, grad);
      for (int e = 0; e < 4; ++e) {
        AdamUpdate<float>(a.step, decay, grad[e], master[e], m[e], v[e]);
      }
      master4[g] = make_float4(master[0], master[1], master[2], master[3]);
      m4[g] = make_float4(m[0], m[1], m[2], m[3]);
      v4[g] = make_float4(v[0], v[1], v[2], v[3]);
      Store4<kP>(a.param, g, master);
      continue;
    }
    for (int64_t i = i0; i < i0 + 4 && i < hi; ++i) {
      const int r = s.Find(i);
      if (s.Covers(r, i)) UpdateOne<kG, kP>(a, s.decay[r], i);
    }
  }
}

template <ElemType kG>
void LaunchForGrad(const LaunchArgs& a, const LaunchRuns& runs, bool by4,
                   dim3 grid, dim3 block, cudaStream_t stream) {
  switch (a.param_type) {
    case ElemType::kBf16:
      if (by4) {
        AdamKernel4<kG, ElemType::kBf16><<<grid, block, 0, stream>>>(a, runs);
      } else {
        AdamKernel<kG, ElemType::kBf16><<<grid, block, 0, stream>>>(a, runs);
      }
      break;
    case ElemType::kFp16:
      if (by4) {
        AdamKernel4<kG, ElemType::kFp16><<<grid, block, 0, stream>>>(a, runs);
      } else {
        AdamKernel<kG, ElemType::kFp16><<<grid, block, 0, stream>>>(a, runs);
      }
      break;
    case ElemType::kFp32:
      if (by4) {
        AdamKernel4<kG, ElemType::kFp32><<<grid, block, 0, stream>>>(a, runs);
      } else {
        AdamKernel<kG, ElemType::kFp32><<<grid, block, 0, stream>>>(a, runs);
      }
      break;
  }
}

int ElemBytes(ElemType t) { return t == ElemType::kFp32 ? 4 : 2; }

// Whether every buffer starts on a four-element boundary.
bool AlignedBy4(const LaunchArgs& a) {
  const auto at = [](const void* p, int bytes) {
    return reinterpret_cast<uintptr_t>(p) % bytes == 0;
  };
  return at(a.master, 16) && at(a.m, 16) && at(a.v, 16) &&
         at(a.grad, 4 * ElemBytes(a.grad_type)) &&
         at(a.param, 4 * ElemBytes(a.param_type));
}

}  // namespace

int LaunchAdamKernel(const LaunchArgs& args, const LaunchRuns& runs,
                     int threads_per_block, int max_blocks, void* stream) {
  if (runs.count <= 0) return 0;
  const bool by4 = AlignedBy4(args);
  const int64_t begin = runs.begin[0];
  const int64_t end = runs.end[runs.count - 1];
  // Threads needed: one per element, or per group of four.
  const int64_t span = by4 ? (end + 3) / 4 - begin / 4 : end - begin;
  const int64_t needed = (span + threads_per_block - 1) / threads_per_block;
  const int blocks =
      static_cast<int>(needed < max_blocks ? needed : max_blocks);
  if (blocks <= 0) return 0;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (args.grad_type) {
    case ElemType::kBf16:
      LaunchForGrad<ElemType::kBf16>(args, runs, by4, blocks, threads_per_block,
                                     s);
      break;
    case ElemType::kFp16:
      LaunchForGrad<ElemType::kFp16>(args, runs, by4, blocks, threads_per_block,
                                     s);
      break;
    case ElemType::kFp32:
      LaunchForGrad<ElemType::kFp32>(args, runs, by4, blocks, threads_per_block,
                                     s);
      break;
  }
  return static_cast<int>(cudaGetLastError());
}

}  // namespace zshard::optim::cuda_internal
