// Element conversions on a CUDA stream, so that the NCCL backend reduces
// bf16 and fp16 in fp32 and rounds once: widen, reduce in fp32, narrow.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace zshard::comm {

// dst[i] = float(src[i]) for i < count; src is bf16 when `bf16`, else fp16.
// Asynchronous on `stream`; returns the launch error.
cudaError_t LaunchWidenToFloat(bool bf16, const void* src, float* dst,
                               size_t count, cudaStream_t stream);

// dst[i] = round-to-nearest-even(src[i]) as bf16 (or fp16) for i < count.
cudaError_t LaunchNarrowFromFloat(bool bf16, const float* src, void* dst,
                                  size_t count, cudaStream_t stream);

}  // namespace zshard::comm
