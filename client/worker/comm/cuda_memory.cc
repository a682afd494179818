// CUDA device-memory functions.
#include "client/worker/comm/cuda_memory.h"

#include <cuda_runtime.h>

#include "client/worker/cuda/cuda_util.h"

namespace zshard::comm {

using cuda::ToStatus;

absl::StatusOr<void*> CudaAlloc(int device, size_t bytes) {
  absl::Status s = ToStatus(cudaSetDevice(device), "set device");
  if (!s.ok()) return s;
  void* ptr = nullptr;
  s = ToStatus(cudaMalloc(&ptr, bytes == 0 ? 1 : bytes), "malloc");
  if (!s.ok()) return s;
  s = ToStatus(cudaMemset(ptr, 0, bytes), "memset");
  if (!s.ok()) {
    cudaFree(ptr);
    return s;
  }
  return ptr;
}

void CudaFree(void* ptr) {
  if (ptr != nullptr) cudaFree(ptr);
}

namespace {

class CudaCommBuffer final : public CommBuffer {
 public:
  CudaCommBuffer(void* ptr, size_t bytes) : ptr_(ptr), bytes_(bytes) {}
  ~CudaCommBuffer() override { CudaFree(ptr_); }
  void* data() override { return ptr_; }
  size_t size() const override { return bytes_; }
  absl::Status CopyFromHost(const void* host, size_t bytes) override {
    return bytes == 0 ? absl::OkStatus()
                      : cuda::CopyToDevice(ptr_, host, bytes);
  }
  absl::Status CopyToHost(void* host, size_t bytes) const override {
    return bytes == 0 ? absl::OkStatus() : cuda::CopyToHost(host, ptr_, bytes);
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
