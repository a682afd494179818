// The CUDA runtime's side of cuda_ipc.h, behind a table of calls so that
// one place (cuda_ipc.cc) picks it or nothing. Arguments reach it checked.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/worker/device/cuda_ipc.h"

namespace zshard::device {

struct CudaIpcBackend {
  // `device_ptr` is not null.
  absl::StatusOr<CudaIpcHandle> (*export_handle)(const void* device_ptr);
  // `ordinal` >= 0.
  absl::StatusOr<void*> (*open_handle)(const CudaIpcHandle& handle,
                                       int ordinal);
  // `device_ptr` is not null.
  absl::Status (*close_handle)(void* device_ptr);
};

// The CUDA runtime backend; defined in cuda_ipc_cuda.cc, built only with
// CUDA.
const CudaIpcBackend& CudaRuntimeIpcBackend();

}  // namespace zshard::device
