// The CUDA AdamW kernel: one flat grid-stride launch over the runs of an
// owned slice, each element updated by AdamUpdate (adam_formula.h), the same
// function the CPU kernels call. Built with IEEE division and square root and
// without fused multiply-adds, so it rounds like the CPU kernels.
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

template <ElemType kG, ElemType kP>
__global__ void AdamKernel(LaunchArgs a, LaunchRuns runs) {
  __shared__ int64_t s_begin[kMaxLaunchRuns];
  __shared__ int64_t s_end[kMaxLaunchRuns];
  __shared__ float s_decay[kMaxLaunchRuns];
  for (int k = threadIdx.x; k < runs.count; k += blockDim.x) {
    s_begin[k] = runs.begin[k];
    s_end[k] = runs.end[k];
    s_decay[k] = runs.decay[k];
  }
  __syncthreads();
  // m, v and grad overlap nothing: let the compiler move their loads past
  // stores. The param may alias the master (fp32 params): neither is
  // restrict.
  float* master_p = a.master;
  float* __restrict__ m_p = a.m;
  float* __restrict__ v_p = a.v;
  const void* __restrict__ grad_p = a.grad;
  void* param_p = a.param;
  const int64_t lo = s_begin[0];
  const int64_t hi = s_end[runs.count - 1];
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  int run = 0;  // the run of the previous element: usually this one's too
  for (int64_t i =
           lo + static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < hi; i += stride) {
    if (i < s_begin[run] || i >= s_end[run]) {
      int l = 0, r = runs.count - 1;  // last run with begin <= i
      while (l < r) {
        const int mid = (l + r + 1) / 2;
        if (s_begin[mid] <= i) {
          l = mid;
        } else {
          r = mid - 1;
        }
      }
      run = l;
      if (i >= s_end[run]) continue;  // between runs: padding or uncovered
    }
    float master = master_p[i];
    float m = m_p[i];
    float v = v_p[i];
    const float g = LoadElem<kG>(grad_p, i);
    AdamUpdate<float>(a.step, s_decay[run], g, master, m, v);
    master_p[i] = master;
    m_p[i] = m;
    v_p[i] = v;
    StoreElem<kP>(param_p, i, master);
  }
}

template <ElemType kG>
void LaunchForGrad(const LaunchArgs& a, const LaunchRuns& runs, dim3 grid,
                   dim3 block, cudaStream_t stream) {
  switch (a.param_type) {
    case ElemType::kBf16:
      AdamKernel<kG, ElemType::kBf16><<<grid, block, 0, stream>>>(a, runs);
      break;
    case ElemType::kFp16:
      AdamKernel<kG, ElemType::kFp16><<<grid, block, 0, stream>>>(a, runs);
      break;
    case ElemType::kFp32:
      AdamKernel<kG, ElemType::kFp32><<<grid, block, 0, stream>>>(a, runs);
      break;
  }
}

}  // namespace

int LaunchAdamKernel(const LaunchArgs& args, const LaunchRuns& runs,
                     int threads_per_block, int max_blocks, void* stream) {
  if (runs.count <= 0) return 0;
  const int64_t span = runs.end[runs.count - 1] - runs.begin[0];
  const int64_t needed = (span + threads_per_block - 1) / threads_per_block;
  const int blocks =
      static_cast<int>(needed < max_blocks ? needed : max_blocks);
  if (blocks <= 0) return 0;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (args.grad_type) {
    case ElemType::kBf16:
      LaunchForGrad<ElemType::kBf16>(args, runs, blocks, threads_per_block, s);
      break;
    case ElemType::kFp16:
      LaunchForGrad<ElemType::kFp16>(args, runs, blocks, threads_per_block, s);
      break;
    case ElemType::kFp32:
      LaunchForGrad<ElemType::kFp32>(args, runs, blocks, threads_per_block, s);
      break;
  }
  return static_cast<int>(cudaGetLastError());
}

}  // namespace zshard::optim::cuda_internal
