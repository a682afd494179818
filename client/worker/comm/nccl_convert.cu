// Widening and narrowing kernels of the NCCL backend (grid-stride loops).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "client/worker/comm/nccl_convert.h"

namespace zshard::comm {
namespace {

constexpr int kThreads = 256;

__global__ void WidenBf16(const __nv_bfloat16* src, float* dst, size_t n) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    dst[i] = __bfloat162float(src[i]);
  }
}

__global__ void WidenFp16(const __half* src, float* dst, size_t n) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    dst[i] = __half2float(src[i]);
  }
}

__global__ void NarrowBf16(const float* src, __nv_bfloat16* dst, size_t n) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    dst[i] = __float2bfloat16_rn(src[i]);
  }
}

__global__ void NarrowFp16(const float* src, __half* dst, size_t n) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    dst[i] = __float2half_rn(src[i]);
  }
}

unsigned Blocks(size_t count) {
  return static_cast<unsigned>(
      std::min<size_t>((count + kThreads - 1) / kThreads, 4096));
}

}  // namespace

cudaError_t LaunchWidenToFloat(bool bf16, const void* src, float* dst,
                               size_t count, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  if (bf16) {
    WidenBf16<<<Blocks(count), kThreads, 0, stream>>>(
        static_cast<const __nv_bfloat16*>(src), dst, count);
  } else {
    WidenFp16<<<Blocks(count), kThreads, 0, stream>>>(
        static_cast<const __half*>(src), dst, count);
  }
  return cudaGetLastError();
}

cudaError_t LaunchNarrowFromFloat(bool bf16, const float* src, void* dst,
                                  size_t count, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  if (bf16) {
    NarrowBf16<<<Blocks(count), kThreads, 0, stream>>>(
        src, static_cast<__nv_bfloat16*>(dst), count);
  } else {
    NarrowFp16<<<Blocks(count), kThreads, 0, stream>>>(
        src, static_cast<__half*>(dst), count);
  }
  return cudaGetLastError();
}

}  // namespace zshard::comm
