// The CUDA runtime helpers shared by the NCCL backend (comm/) and the CUDA
// Adam kernel (optim/): errors as Status, the device count, synchronous
// copies. No CUDA types appear here, so code that must not include CUDA
// headers (tests, benchmarks) may call them. Built only with CUDA.
#pragma once

#include <cstddef>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace zshard::cuda {

// OK for cudaSuccess (0); otherwise Internal "cuda <what> failed: <error>".
// `err` is a cudaError_t.
absl::Status ToStatus(int err, absl::string_view what);

// Number of usable CUDA devices; 0 when there is no driver or device.
int DeviceCount();

// Synchronous copies of `bytes` between host and device memory.
absl::Status CopyToDevice(void* dst, const void* src, size_t bytes);
absl::Status CopyToHost(void* dst, const void* src, size_t bytes);

}  // namespace zshard::cuda
