// CudaAdam: the AdamW step of an owned slice in device memory, one flat
// kernel launch per slice (per 128 pieces), plus the small device utilities
// its tests and benchmark need (buffers, copy bandwidth; the device count is
// client/worker/cuda/cuda_util.h's).
// No CUDA types appear here.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "client/worker/optim/adam.h"
#include "client/worker/optim/optimizer.h"
#include "common/plan/model_spec.h"

namespace zshard::optim {

struct CudaAdamOptions {
  int device = 0;  // CUDA device ordinal (default 0)
  // A cudaStream_t to enqueue on, borrowed. nullptr (default): CudaAdam
  // creates and owns a non-blocking stream.
  void* stream = nullptr;
  int threads_per_block = 256;  // default 256, in [32, 1024]
  int blocks_per_sm = 8;        // grid = SMs * blocks_per_sm (default 8)
};

// The Optimizer over device memory: Update (optimizer.h) enqueues one flat
// kernel per slice (per 128 pieces) on the stream and returns; Synchronize
// waits for it. Not thread-safe: one caller at a time. Keeps the device
// current only during its calls.
class CudaAdam final : public Optimizer {
 public:
  // Unavailable without a device; InvalidArgument for bad options.
  static absl::StatusOr<std::unique_ptr<CudaAdam>> Create(
      const CudaAdamOptions& options);
  ~CudaAdam();
  CudaAdam(const CudaAdam&) = delete;
  CudaAdam& operator=(const CudaAdam&) = delete;

  // Blocks until the stream's work is done; Internal with the CUDA error.
  absl::Status Synchronize() override;
  absl::string_view name() const override { return "cuda adam"; }

 private:
  CudaAdam(const CudaAdamOptions& options, void* stream, bool owns_stream,
           int max_blocks);
  // Enqueues the update (pointers in device memory, the segment table on
  // the host) on the stream; Internal on a launch failure.
  absl::Status DoUpdate(const AdamStepParams& params,
                        absl::Span<const Segment> segments, float* master,
                        float* m, float* v, const void* grad,
                        plan::DType grad_dtype, void* param_out,
                        plan::DType param_dtype, int64_t n) override;

  const CudaAdamOptions options_;
  void* stream_;
  bool owns_stream_;
  int max_blocks_;
};

// Device memory of a fixed size, freed on destruction. Move-only.
class DeviceBuffer {
 public:
  // Allocates `bytes` on device `device`; ResourceExhausted / Unavailable.
  static absl::StatusOr<DeviceBuffer> Allocate(int64_t bytes, int device = 0);
  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  ~DeviceBuffer();

  void* data() const { return data_; }
  int64_t size() const { return bytes_; }
  // Synchronous copies of `bytes` (at most size()) from / to host memory.
  absl::Status CopyFromHost(const void* src, int64_t bytes);
  absl::Status CopyToHost(void* dst, int64_t bytes) const;

 private:
  void* data_ = nullptr;
  int64_t bytes_ = 0;
};

// Device-to-device cudaMemcpy bandwidth on `device`: copies `bytes` `iters`
// times after a warm-up and returns (read + write) bytes per second, i.e.
// 2 * bytes * iters / seconds.
absl::StatusOr<double> MeasureDeviceCopyBandwidth(int64_t bytes, int iters,
                                                  int device = 0);

}  // namespace zshard::optim
