// CudaAdam and the device utilities: the segment table cut into
// launch-sized runs, device buffers and the copy bandwidth probe.
#include "client/worker/optim/adam_cuda.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/worker/cuda/cuda_util.h"
#include "client/worker/optim/adam_cuda_kernel.h"
#include "common/status.h"

namespace zshard::optim {
namespace {

using cuda::ToStatus;

static_assert(static_cast<int>(plan::DType::kBf16) ==
                      static_cast<int>(cuda_internal::ElemType::kBf16) &&
                  static_cast<int>(plan::DType::kFp16) ==
                      static_cast<int>(cuda_internal::ElemType::kFp16) &&
                  static_cast<int>(plan::DType::kFp32) ==
                      static_cast<int>(cuda_internal::ElemType::kFp32),
              "cuda element types are numbered like plan::DType");

cuda_internal::ElemType ToElem(plan::DType d) {
  return static_cast<cuda_internal::ElemType>(static_cast<int>(d));
}

}  // namespace

absl::StatusOr<std::unique_ptr<CudaAdam>> CudaAdam::Create(
    const CudaAdamOptions& options) {
  if (options.threads_per_block < 32 || options.threads_per_block > 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("cuda adam threads_per_block ", options.threads_per_block,
                     " is not in [32, 1024]"));
  }
  if (options.blocks_per_sm < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cuda adam blocks_per_sm ", options.blocks_per_sm, " is not >= 1"));
  }
  const int count = cuda::DeviceCount();
  if (options.device < 0 || options.device >= count) {
    return absl::UnavailableError(absl::StrCat("cuda device ", options.device,
                                               " is not present (", count,
                                               " devices)"));
  }
  ZSHARD_RETURN_IF_ERROR(ToStatus(cudaSetDevice(options.device), "set device"));
  int sms = 0;
  ZSHARD_RETURN_IF_ERROR(
      ToStatus(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount,
                                      options.device),
               "get multiprocessor count"));
  void* stream = options.stream;
  const bool owns = stream == nullptr;
  if (owns) {
    cudaStream_t s;
    ZSHARD_RETURN_IF_ERROR(ToStatus(
        cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "create stream"));
    stream = s;
  }
  return std::unique_ptr<CudaAdam>(
      new CudaAdam(options, stream, owns, sms * options.blocks_per_sm));
}

CudaAdam::CudaAdam(const CudaAdamOptions& options, void* stream,
                   bool owns_stream, int max_blocks)
    : options_(options),
      stream_(stream),
      owns_stream_(owns_stream),
      max_blocks_(max_blocks) {}

CudaAdam::~CudaAdam() {
  if (owns_stream_) {
    cudaSetDevice(options_.device);
    cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
  }
}

absl::Status CudaAdam::DoUpdate(const AdamStepParams& params,
                                absl::Span<const Segment> segments,
                                float* master, float* m, float* v,
                                const void* grad, plan::DType grad_dtype,
                                void* param_out, plan::DType param_dtype,
                                int64_t n) {
  const Segment whole{0, n, false, false};
  if (segments.empty()) segments = absl::MakeConstSpan(&whole, 1);
  ZSHARD_RETURN_IF_ERROR(
      ToStatus(cudaSetDevice(options_.device), "set device"));

  cuda_internal::LaunchArgs args;
  args.step = params;
  args.master = master;
  args.m = m;
  args.v = v;
  args.grad = grad;
  args.grad_type = ToElem(grad_dtype);
  args.param = param_out;
  args.param_type = ToElem(param_dtype);
  cuda_internal::LaunchRuns runs;
  auto flush = [&]() -> absl::Status {
    if (runs.count == 0) return absl::OkStatus();
    const int err = cuda_internal::LaunchAdamKernel(
        args, runs, options_.threads_per_block, max_blocks_, stream_);
    runs.count = 0;
    return ToStatus(err, "adam kernel launch");
  };
  for (const Segment& seg : segments) {
    if (seg.padding || seg.end == seg.begin) continue;
    if (runs.count == cuda_internal::kMaxLaunchRuns) {
      ZSHARD_RETURN_IF_ERROR(flush());
    }
    runs.begin[runs.count] = seg.begin;
    runs.end[runs.count] = seg.end;
    runs.decay[runs.count] = seg.no_weight_decay ? 1.0f : params.decay;
    ++runs.count;
  }
  return flush();
}

absl::Status CudaAdam::Synchronize() {
  ZSHARD_RETURN_IF_ERROR(
      ToStatus(cudaSetDevice(options_.device), "set device"));
  return ToStatus(cudaStreamSynchronize(static_cast<cudaStream_t>(stream_)),
                  "stream synchronize");
}

absl::StatusOr<DeviceBuffer> DeviceBuffer::Allocate(int64_t bytes, int device) {
  if (bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("device buffer size ", bytes, " is negative"));
  }
  if (device < 0 || device >= cuda::DeviceCount()) {
    return absl::UnavailableError(
        absl::StrCat("cuda device ", device, " is not present"));
  }
  ZSHARD_RETURN_IF_ERROR(ToStatus(cudaSetDevice(device), "set device"));
  DeviceBuffer buf;
  if (bytes > 0) {
    const cudaError_t err = cudaMalloc(&buf.data_, bytes);
    if (err != cudaSuccess) {
      cudaGetLastError();
      return absl::ResourceExhaustedError(
          absl::StrCat("cuda malloc of ", bytes,
                       " bytes failed: ", cudaGetErrorString(err)));
    }
  }
  buf.bytes_ = bytes;
  return buf;
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) cudaFree(data_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (data_ != nullptr) cudaFree(data_);
}

absl::Status DeviceBuffer::CopyFromHost(const void* src, int64_t bytes) {
  if (bytes < 0 || bytes > bytes_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device buffer copy of ", bytes, " bytes exceeds its ", bytes_));
  }
  if (bytes == 0) return absl::OkStatus();
  return cuda::CopyToDevice(data_, src, static_cast<size_t>(bytes));
}

absl::Status DeviceBuffer::CopyToHost(void* dst, int64_t bytes) const {
  if (bytes < 0 || bytes > bytes_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device buffer copy of ", bytes, " bytes exceeds its ", bytes_));
  }
  if (bytes == 0) return absl::OkStatus();
  return cuda::CopyToHost(dst, data_, static_cast<size_t>(bytes));
}

absl::StatusOr<double> MeasureDeviceCopyBandwidth(int64_t bytes, int iters,
                                                  int device) {
  if (bytes <= 0 || iters <= 0) {
    return absl::InvalidArgumentError(
        "device copy bandwidth needs bytes > 0 and iters > 0");
  }
  ZSHARD_ASSIGN_OR_RETURN(DeviceBuffer src,
                          DeviceBuffer::Allocate(bytes, device));
  ZSHARD_ASSIGN_OR_RETURN(DeviceBuffer dst,
                          DeviceBuffer::Allocate(bytes, device));
  ZSHARD_RETURN_IF_ERROR(ToStatus(cudaMemset(src.data(), 1, bytes), "memset"));
  cudaEvent_t start, stop;
  ZSHARD_RETURN_IF_ERROR(ToStatus(cudaEventCreate(&start), "event create"));
  ZSHARD_RETURN_IF_ERROR(ToStatus(cudaEventCreate(&stop), "event create"));
  absl::Status status = ToStatus(
      cudaMemcpy(dst.data(), src.data(), bytes, cudaMemcpyDeviceToDevice),
      "device copy");
  float ms = 0;
  if (status.ok()) {
    cudaEventRecord(start);
    for (int i = 0; i < iters; ++i) {
      cudaMemcpyAsync(dst.data(), src.data(), bytes, cudaMemcpyDeviceToDevice);
    }
    cudaEventRecord(stop);
    status = ToStatus(cudaEventSynchronize(stop), "device copy");
    if (status.ok()) {
      status = ToStatus(cudaEventElapsedTime(&ms, start, stop), "timing");
    }
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  ZSHARD_RETURN_IF_ERROR(status);
  if (ms <= 0)
    return absl::InternalError("device copy took no measurable time");
  return 2.0 * static_cast<double>(bytes) * iters / (ms * 1e-3);
}

}  // namespace zshard::optim
