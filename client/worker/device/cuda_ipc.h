// Device buffers another process can map: a CUDA IPC handle exported for a
// device allocation, opened in another process on the same machine. No CUDA
// types appear here; in a build without CUDA every call is Unimplemented.
#pragma once

#include <array>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace zshard::device {

// The bytes of a cudaIpcMemHandle_t: plain data, to be sent to the process
// that opens it (any byte channel will do).
struct CudaIpcHandle {
  std::array<uint8_t, 64> bytes;
};

// Exports the device allocation that starts at `device_ptr` (from
// cudaMalloc, on any device of this process). InvalidArgument for a null
// pointer or one that is not device memory; FailedPrecondition when no
// CUDA device is usable; Unimplemented in a build without CUDA.
absl::StatusOr<CudaIpcHandle> ExportCudaIpcHandle(const void* device_ptr);

// Opens, on device `ordinal` of this process, an allocation another process
// exported (a process cannot open its own). Returns the device pointer,
// valid until CloseCudaIpcHandle. InvalidArgument for a negative ordinal or
// a handle CUDA refuses; FailedPrecondition when device `ordinal` is not
// usable; Unimplemented in a build without CUDA.
absl::StatusOr<void*> OpenCudaIpcHandle(const CudaIpcHandle& handle,
                                        int ordinal);

// Closes a pointer OpenCudaIpcHandle returned; the exporter's allocation
// stays. InvalidArgument for a null pointer or one CUDA did not open;
// Unimplemented in a build without CUDA.
absl::Status CloseCudaIpcHandle(void* device_ptr);

}  // namespace zshard::device
