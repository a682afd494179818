// The CUDA runtime backend of cuda_ipc.h: cudaIpcGetMemHandle,
// cudaIpcOpenMemHandle and cudaIpcCloseMemHandle, each on the right device
// and leaving the caller's current device as it was. Built only with CUDA.
#include <cuda_runtime.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "client/worker/device/cuda_ipc_backend.h"

namespace zshard::device {
namespace {

static_assert(sizeof(cudaIpcMemHandle_t) == sizeof(CudaIpcHandle::bytes),
              "a cuda ipc handle is 64 bytes");

std::string ErrorText(cudaError_t err) {
  return absl::StrCat(cudaGetErrorName(err), ": ", cudaGetErrorString(err));
}

bool NoDevice(cudaError_t err) {
  return err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver ||
         err == cudaErrorInitializationError ||
         err == cudaErrorSystemDriverMismatch;
}

// Runs `call` with device `ordinal` current, then makes the caller's
// device current again.
template <typename Call>
cudaError_t OnDevice(int ordinal, Call call) {
  int previous = -1;
  cudaError_t err = cudaGetDevice(&previous);
  if (err != cudaSuccess) return err;
  if (previous != ordinal && (err = cudaSetDevice(ordinal)) != cudaSuccess) {
    return err;
  }
  err = call();
  if (previous != ordinal) cudaSetDevice(previous);
  return err;
}

absl::StatusOr<CudaIpcHandle> Export(const void* device_ptr) {
  cudaPointerAttributes attr{};
  cudaError_t err = cudaPointerGetAttributes(&attr, device_ptr);
  if (err != cudaSuccess) {
    cudaGetLastError();  // not sticky: let later calls start clean
    const std::string message =
        absl::StrCat("cuda ipc export: ", ErrorText(err));
    if (NoDevice(err)) {
      return absl::FailedPreconditionError(
          absl::StrCat(message, " (no usable cuda device)"));
    }
    return absl::InvalidArgumentError(message);
  }
  if (attr.type != cudaMemoryTypeDevice) {
    return absl::InvalidArgumentError(
        "cuda ipc export: the pointer is not device memory");
  }
  cudaIpcMemHandle_t handle;
  err = OnDevice(attr.device, [&] {
    return cudaIpcGetMemHandle(&handle, const_cast<void*>(device_ptr));
  });
  if (err != cudaSuccess) {
    cudaGetLastError();
    return absl::InvalidArgumentError(absl::StrCat(
        "cuda ipc export on cuda:", attr.device, ": ", ErrorText(err),
        " (it takes the start of a cudaMalloc allocation)"));
  }
  CudaIpcHandle out;
  std::memcpy(out.bytes.data(), &handle, sizeof(handle));
  return out;
}

absl::StatusOr<void*> Open(const CudaIpcHandle& handle, int ordinal) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || ordinal >= count) {
    cudaGetLastError();
    return absl::FailedPreconditionError(absl::StrCat(
        "cuda ipc open: cuda:", ordinal, " is not usable (this machine has ",
        err == cudaSuccess ? count : 0, " cuda devices)"));
  }
  cudaIpcMemHandle_t h;
  std::memcpy(&h, handle.bytes.data(), sizeof(h));
  void* ptr = nullptr;
  err = OnDevice(ordinal, [&] {
    return cudaIpcOpenMemHandle(&ptr, h, cudaIpcMemLazyEnablePeerAccess);
  });
  if (err != cudaSuccess) {
    cudaGetLastError();
    return absl::InvalidArgumentError(
        absl::StrCat("cuda ipc open on cuda:", ordinal, ": ", ErrorText(err),
                     " (a handle another process exported, still alive)"));
  }
  return ptr;
}

absl::Status Close(void* device_ptr) {
  const cudaError_t err = cudaIpcCloseMemHandle(device_ptr);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return absl::InvalidArgumentError(
        absl::StrCat("cuda ipc close: ", ErrorText(err)));
  }
  return absl::OkStatus();
}

}  // namespace

const CudaIpcBackend& CudaRuntimeIpcBackend() {
  static constexpr CudaIpcBackend kBackend = {&Export, &Open, &Close};
  return kBackend;
}

}  // namespace zshard::device
