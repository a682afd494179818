// The CUDA IPC calls: their argument checks, then the CUDA runtime backend
// where this build has one.
#include "client/worker/device/cuda_ipc.h"

#include "absl/strings/str_cat.h"
#include "client/worker/device/cuda_ipc_backend.h"

namespace zshard::device {
namespace {

// The one place that knows whether this build has CUDA.
const CudaIpcBackend* Backend() {
#if ZSHARD_HAVE_CUDA
  return &CudaRuntimeIpcBackend();
#else
  return nullptr;
#endif
}

absl::Status NoCuda(const char* what) {
  return absl::UnimplementedError(
      absl::StrCat("cuda ipc ", what, ": this build has no cuda support"));
}

}  // namespace

absl::StatusOr<CudaIpcHandle> ExportCudaIpcHandle(const void* device_ptr) {
  const CudaIpcBackend* backend = Backend();
  if (backend == nullptr) return NoCuda("export");
  if (device_ptr == nullptr) {
    return absl::InvalidArgumentError("cuda ipc export: null device pointer");
  }
  return backend->export_handle(device_ptr);
}

absl::StatusOr<void*> OpenCudaIpcHandle(const CudaIpcHandle& handle,
                                        int ordinal) {
  const CudaIpcBackend* backend = Backend();
  if (backend == nullptr) return NoCuda("open");
  if (ordinal < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cuda ipc open: device ordinal ", ordinal, " < 0"));
  }
  return backend->open_handle(handle, ordinal);
}

absl::Status CloseCudaIpcHandle(void* device_ptr) {
  const CudaIpcBackend* backend = Backend();
  if (backend == nullptr) return NoCuda("close");
  if (device_ptr == nullptr) {
    return absl::InvalidArgumentError("cuda ipc close: null device pointer");
  }
  return backend->close_handle(device_ptr);
}

}  // namespace zshard::device
