// Memory that a communicator of a given device can use (host memory for
// kCpu, CUDA device memory for kCuda), so that callers such as benchmarks
// need no CUDA headers and no conditional compilation.
#pragma once

#include <cstddef>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/worker/comm/communicator.h"

namespace zshard::comm {

// An owned, zero-initialised buffer. Thread-compatible.
class CommBuffer {
 public:
  virtual ~CommBuffer() = default;
  virtual void* data() = 0;
  virtual size_t size() const = 0;
  // Copies `bytes` (<= size()) bytes from / to host memory.
  virtual absl::Status CopyFromHost(const void* host, size_t bytes) = 0;
  virtual absl::Status CopyToHost(void* host, size_t bytes) const = 0;
};

// Allocates `bytes` bytes for `device` (kCuda: on CUDA device
// `cuda_device`). Unimplemented for kCuda when the NCCL backend is not
// built; Internal when the allocation fails.
absl::StatusOr<std::unique_ptr<CommBuffer>> AllocateCommBuffer(
    CommDevice device, int cuda_device, size_t bytes);

// The host implementation (used by AllocateCommBuffer for kCpu).
std::unique_ptr<CommBuffer> AllocateHostCommBuffer(size_t bytes);

}  // namespace zshard::comm
