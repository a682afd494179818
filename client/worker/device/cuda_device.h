// The CUDA device: cudaMalloc'd memory (pinned host memory for staging),
// every operation on one non-blocking stream of its own and complete when
// it returns, host copies through two pinned staging buffers (the copy of
// one chunk overlapping the host side of the next), the kernels of
// cuda_kernels.cu, and CudaAdam on the same stream. Built with CUDA only;
// no CUDA types appear here.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "client/worker/device/device.h"

namespace zshard::device {

// The CUDA device `ordinal`. FailedPrecondition naming the problem when it
// is not there; Internal when its stream cannot be made.
absl::StatusOr<std::unique_ptr<Device>> OpenCudaDevice(int ordinal);

}  // namespace zshard::device
