// Small CUDA device-memory functions for code that must not include CUDA
// headers (tests and benchmarks of the NCCL backend). Built only with CUDA.
#pragma once

#include <cstddef>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/worker/comm/comm_buffer.h"

namespace zshard::comm {

// Number of usable CUDA devices; 0 when there is no driver or device.
int CudaDeviceCount();

// cudaMalloc on `device`; the memory is zeroed. Free with CudaFree.
absl::StatusOr<void*> CudaAlloc(int device, size_t bytes);
void CudaFree(void* ptr);

// Synchronous copies between host and device memory.
absl::Status CudaCopyToDevice(void* dst, const void* src, size_t bytes);
absl::Status CudaCopyToHost(void* dst, const void* src, size_t bytes);

// A CommBuffer in device memory of `device` (AllocateCommBuffer's kCuda).
absl::StatusOr<std::unique_ptr<CommBuffer>> AllocateCudaCommBuffer(
    int device, size_t bytes);

}  // namespace zshard::comm
