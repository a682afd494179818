// Small CUDA device-memory functions for code that must not include CUDA
// headers (tests and benchmarks of the NCCL backend); the device count and
// the copies are in client/worker/cuda/cuda_util.h. Built only with CUDA.
#pragma once

#include <cstddef>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/worker/comm/comm_buffer.h"

namespace zshard::comm {

// cudaMalloc on `device`; the memory is zeroed. Free with CudaFree.
absl::StatusOr<void*> CudaAlloc(int device, size_t bytes);
void CudaFree(void* ptr);

// A CommBuffer in device memory of `device` (AllocateCommBuffer's kCuda).
absl::StatusOr<std::unique_ptr<CommBuffer>> AllocateCudaCommBuffer(
    int device, size_t bytes);

}  // namespace zshard::comm
