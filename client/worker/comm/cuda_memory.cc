// CUDA device-memory functions.
#include "client/worker/comm/cuda_memory.h"

#include <cuda_runtime.h>

#include "absl/strings/str_cat.h"

namespace zshard::comm {
namespace {

absl::Status CudaStatus(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat("cuda ", what, ": ", cudaGetErrorString(err)));
}

}  // namespace

int CudaDeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return count;
}

absl::StatusOr<void*> CudaAlloc(int device, size_t bytes) {
  absl::Status s = CudaStatus(cudaSetDevice(device), "set device");
  if (!s.ok()) return s;
  void* ptr = nullptr;
  s = CudaStatus(cudaMalloc(&ptr, bytes == 0 ? 1 : bytes), "malloc");
  if (!s.ok()) return s;
  s = CudaStatus(cudaMemset(ptr, 0, bytes), "memset");
  if (!s.ok()) {
    cudaFree(ptr);
    return s;
  }
  return ptr;
}

void CudaFree(void* ptr) {
  if (ptr != nullptr) cudaFree(ptr);
}

absl::Status CudaCopyToDevice(void* dst, const void* src, size_t bytes) {
  return CudaStatus(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice),
                    "copy to device");
}

absl::Status CudaCopyToHost(void* dst, const void* src, size_t bytes) {
  return CudaStatus(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost),
                    "copy to host");
}

namespace {

class CudaCommBuffer final : public CommBuffer {
 public:
  CudaCommBuffer(void* ptr, size_t bytes) : ptr_(ptr), bytes_(bytes) {}
  ~CudaCommBuffer() override { CudaFree(ptr_); }
  void* data() override { return ptr_; }
  size_t size() const override { return bytes_; }
  absl::Status CopyFromHost(const void* host, size_t bytes) override {
    return bytes == 0 ? absl::OkStatus() : CudaCopyToDevice(ptr_, host, bytes);
  }
  absl::Status CopyToHost(void* host, size_t bytes) const override {
    return bytes == 0 ? absl::OkStatus()
                      : zshard::comm::CudaCopyToHost(host, ptr_, bytes);
  }

 private:
  void* ptr_;
  size_t bytes_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<CommBuffer>> AllocateCudaCommBuffer(
    int device, size_t bytes) {
  auto ptr = CudaAlloc(device, bytes);
  if (!ptr.ok()) return ptr.status();
  return std::unique_ptr<CommBuffer>(new CudaCommBuffer(*ptr, bytes));
}

}  // namespace zshard::comm
