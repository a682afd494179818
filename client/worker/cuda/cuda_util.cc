// CUDA runtime calls turned into Status.
#include "client/worker/cuda/cuda_util.h"

#include <cuda_runtime.h>

#include "absl/strings/str_cat.h"

namespace zshard::cuda {

absl::Status ToStatus(int err, absl::string_view what) {
  if (err == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(
      "cuda ", what,
      " failed: ", cudaGetErrorString(static_cast<cudaError_t>(err))));
}

int DeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return count;
}

absl::Status CopyToDevice(void* dst, const void* src, size_t bytes) {
  return ToStatus(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice),
                  "copy to device");
}

absl::Status CopyToHost(void* dst, const void* src, size_t bytes) {
  return ToStatus(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost),
                  "copy to host");
}

}  // namespace zshard::cuda
