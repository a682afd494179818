// CudaDevice: the Device over one CUDA device's memory.
#include "client/worker/device/cuda_device.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/worker/cuda/cuda_util.h"
#include "client/worker/device/cuda_kernels.h"
#include "client/worker/optim/adam_cuda.h"
#include "common/status.h"

namespace zshard::device {
namespace {

using cuda::ToStatus;
namespace k = cuda_kernels;

// Bytes per staging buffer (two of them).
constexpr int64_t kStagingBytes = int64_t{4} << 20;

k::Elem ToElem(plan::DType d) {
  static_assert(static_cast<int>(plan::DType::kBf16) ==
                        static_cast<int>(k::Elem::kBf16) &&
                    static_cast<int>(plan::DType::kFp16) ==
                        static_cast<int>(k::Elem::kFp16) &&
                    static_cast<int>(plan::DType::kFp32) ==
                        static_cast<int>(k::Elem::kFp32),
                "kernel element types are numbered like plan::DType");
  return static_cast<k::Elem>(static_cast<int>(d));
}

class CudaDevice final : public Device {
 public:
  CudaDevice(int ordinal, cudaStream_t stream)
      : Device(DeviceSpec{DeviceKind::kCuda, ordinal}),
        ordinal_(ordinal),
        stream_(stream) {}

  ~CudaDevice() override {
    // Buffers of this device itself go first, then the stream.
    {
      absl::MutexLock lock(&mu_);
      staging_[0] = Buffer();
      staging_[1] = Buffer();
      partials_ = Buffer();
      sums_ = Buffer();
      sums_host_ = Buffer();
    }
    cudaSetDevice(ordinal_);
    for (cudaEvent_t& e : events_) {
      if (e != nullptr) cudaEventDestroy(e);
    }
    cudaStreamDestroy(stream_);
  }

  int64_t capacity_bytes() const override {
    size_t free_bytes = 0, total = 0;
    if (cudaSetDevice(ordinal_) != cudaSuccess ||
        cudaMemGetInfo(&free_bytes, &total) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    return static_cast<int64_t>(total);
  }

  absl::Status CopyToDevice(void* dst, const void* src,
                            int64_t bytes) override {
    if (bytes <= 0) return absl::OkStatus();
    absl::MutexLock lock(&mu_);
    ZSHARD_RETURN_IF_ERROR(PrepareStaging());
    const char* in = static_cast<const char*>(src);
    char* out = static_cast<char*>(dst);
    // Chunk c fills staging buffer c % 2 once the copy out of it two
    // chunks ago is done, so the host's memcpy overlaps the last transfer.
    bool pending[2] = {false, false};
    int c = 0;
    for (int64_t at = 0; at < bytes; at += kStagingBytes, ++c) {
      const int b = c % 2;
      const int64_t n = std::min(kStagingBytes, bytes - at);
      if (pending[b]) {
        ZSHARD_RETURN_IF_ERROR(
            ToStatus(cudaEventSynchronize(events_[b]), "event synchronize"));
      }
      std::memcpy(staging_[b].data(), in + at, static_cast<size_t>(n));
      ZSHARD_RETURN_IF_ERROR(
          ToStatus(cudaMemcpyAsync(out + at, staging_[b].data(), n,
                                   cudaMemcpyHostToDevice, stream_),
                   "copy to device"));
      ZSHARD_RETURN_IF_ERROR(
          ToStatus(cudaEventRecord(events_[b], stream_), "event record"));
      pending[b] = true;
    }
    return SyncLocked();
  }

  absl::Status CopyToHost(void* dst, const void* src,
                          int64_t bytes) const override {
    if (bytes <= 0) return absl::OkStatus();
    absl::MutexLock lock(&mu_);
    ZSHARD_RETURN_IF_ERROR(PrepareStaging());
    const char* in = static_cast<const char*>(src);
    char* out = static_cast<char*>(dst);
    // The transfer of chunk c overlaps the host's memcpy of chunk c - 1.
    int64_t prev_at = -1, prev_n = 0;
    int c = 0;
    auto drain = [&](int b) -> absl::Status {
      ZSHARD_RETURN_IF_ERROR(
          ToStatus(cudaEventSynchronize(events_[b]), "event synchronize"));
      std::memcpy(out + prev_at, staging_[b].data(),
                  static_cast<size_t>(prev_n));
      return absl::OkStatus();
    };
    for (int64_t at = 0; at < bytes; at += kStagingBytes, ++c) {
      const int b = c % 2;
      const int64_t n = std::min(kStagingBytes, bytes - at);
      ZSHARD_RETURN_IF_ERROR(
          ToStatus(cudaMemcpyAsync(staging_[b].data(), in + at, n,
                                   cudaMemcpyDeviceToHost, stream_),
                   "copy to host"));
      ZSHARD_RETURN_IF_ERROR(
          ToStatus(cudaEventRecord(events_[b], stream_), "event record"));
      if (prev_at >= 0) ZSHARD_RETURN_IF_ERROR(drain(1 - b));
      prev_at = at;
      prev_n = n;
    }
    return drain((c - 1) % 2);
  }

  absl::Status CopyOnDevice(void* dst, const void* src,
                            int64_t bytes) override {
    if (bytes <= 0) return absl::OkStatus();
    absl::MutexLock lock(&mu_);
    ZSHARD_RETURN_IF_ERROR(Current());
    ZSHARD_RETURN_IF_ERROR(ToStatus(
        cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_),
        "copy on device"));
    return SyncLocked();
  }

  absl::Status Zero(void* dst, int64_t bytes) override {
    if (bytes <= 0) return absl::OkStatus();
    absl::MutexLock lock(&mu_);
    ZSHARD_RETURN_IF_ERROR(Current());
    ZSHARD_RETURN_IF_ERROR(
        ToStatus(cudaMemsetAsync(dst, 0, bytes, stream_), "memset"));
    return SyncLocked();
  }

  absl::Status Synchronize() override {
    absl::MutexLock lock(&mu_);
    return SyncLocked();
  }

  absl::StatusOr<std::unique_ptr<optim::Optimizer>> CreateAdam(
      const AdamOptions&) override {
    optim::CudaAdamOptions o;
    o.device = ordinal_;
    o.stream = stream_;
    ZSHARD_ASSIGN_OR_RETURN(std::unique_ptr<optim::CudaAdam> adam,
                            optim::CudaAdam::Create(o));
    return std::unique_ptr<optim::Optimizer>(std::move(adam));
  }

 private:
  void* Reserve(MemoryCategory category, int64_t bytes) override {
    if (cudaSetDevice(ordinal_) != cudaSuccess) {
      cudaGetLastError();
      return nullptr;
    }
    void* data = nullptr;
    if (category == MemoryCategory::kStaging) {
      if (cudaMallocHost(&data, bytes) != cudaSuccess) {
        cudaGetLastError();
        return nullptr;
      }
      std::memset(data, 0, static_cast<size_t>(bytes));
      return data;
    }
    if (cudaMalloc(&data, bytes) != cudaSuccess) {
      cudaGetLastError();
      return nullptr;
    }
    if (cudaMemset(data, 0, bytes) != cudaSuccess) {
      cudaGetLastError();
      cudaFree(data);
      return nullptr;
    }
    return data;
  }

  void Release(MemoryCategory category, void* data) override {
    cudaSetDevice(ordinal_);
    if (category == MemoryCategory::kStaging) {
      cudaFreeHost(data);
    } else {
      cudaFree(data);
    }
  }

  absl::Status DoCastToParam(const float* master, void* param,
                             plan::DType param_dtype,
                             absl::Span<const optim::Segment> segments,
                             int64_t) override {
    if (param_dtype == plan::DType::kFp32 && param == master) {
      return absl::OkStatus();
    }
    absl::MutexLock lock(&mu_);
    ZSHARD_RETURN_IF_ERROR(Current());
    for (const optim::Segment& seg : segments) {
      if (seg.padding) continue;
      ZSHARD_RETURN_IF_ERROR(
          ToStatus(k::LaunchCast(master, param, ToElem(param_dtype), seg.begin,
                                 seg.end, stream_),
                   "cast kernel launch"));
    }
    return SyncLocked();
  }

  absl::Status DoSumSquares(const void* grad, plan::DType grad_dtype,
                            absl::Span<const optim::Segment> segments,
                            absl::Span<GradStats> out) override {
    // Global block numbering over the non-padding segments.
    std::vector<int> index;  // segment of each summed one
    std::vector<int64_t> first;
    int64_t blocks = 0;
    for (size_t s = 0; s < segments.size(); ++s) {
      if (segments[s].padding || segments[s].end == segments[s].begin) {
        continue;
      }
      index.push_back(static_cast<int>(s));
      first.push_back(blocks);
      blocks += (segments[s].end - segments[s].begin + k::kSumBlock - 1) /
                k::kSumBlock;
    }
    if (index.empty()) return absl::OkStatus();
    const int64_t count = static_cast<int64_t>(index.size());
    absl::MutexLock lock(&mu_);
    ZSHARD_RETURN_IF_ERROR(Current());
    ZSHARD_RETURN_IF_ERROR(Grow(partials_, MemoryCategory::kComm,
                                blocks * int64_t{sizeof(float)}));
    ZSHARD_RETURN_IF_ERROR(Grow(sums_, MemoryCategory::kComm, count * 16));
    ZSHARD_RETURN_IF_ERROR(
        Grow(sums_host_, MemoryCategory::kStaging, count * 16));
    double* sq = static_cast<double*>(sums_.data());
    int64_t* bad = reinterpret_cast<int64_t*>(sq + count);
    for (int64_t g = 0; g < count; g += k::kMaxSegments) {
      k::SumSegments segs;
      segs.count =
          static_cast<int>(std::min<int64_t>(k::kMaxSegments, count - g));
      for (int i = 0; i < segs.count; ++i) {
        const optim::Segment& seg = segments[index[g + i]];
        segs.begin[i] = seg.begin;
        segs.end[i] = seg.end;
        segs.first_block[i] = first[g + i];
      }
      const k::Elem type = ToElem(grad_dtype);
      float* partials = static_cast<float*>(partials_.data());
      ZSHARD_RETURN_IF_ERROR(
          ToStatus(k::LaunchBlockPartials(grad, type, segs, partials, stream_),
                   "sum of squares kernel launch"));
      ZSHARD_RETURN_IF_ERROR(
          ToStatus(k::LaunchSegmentSums(grad, type, segs, partials, sq + g,
                                        bad + g, stream_),
                   "sum of squares kernel launch"));
    }
    ZSHARD_RETURN_IF_ERROR(
        ToStatus(cudaMemcpyAsync(sums_host_.data(), sums_.data(), count * 16,
                                 cudaMemcpyDeviceToHost, stream_),
                 "copy to host"));
    ZSHARD_RETURN_IF_ERROR(SyncLocked());
    const double* host_sq = static_cast<const double*>(sums_host_.data());
    const int64_t* host_bad = reinterpret_cast<const int64_t*>(host_sq + count);
    for (int64_t i = 0; i < count; ++i) {
      out[index[i]].sum_squares = host_sq[i];
      out[index[i]].nonfinite = host_bad[i];
    }
    return absl::OkStatus();
  }

  absl::Status DoScale(void* data, plan::DType dtype, int64_t n,
                       float factor) override {
    absl::MutexLock lock(&mu_);
    ZSHARD_RETURN_IF_ERROR(Current());
    ZSHARD_RETURN_IF_ERROR(
        ToStatus(k::LaunchScale(data, ToElem(dtype), n, factor, stream_),
                 "scale kernel launch"));
    return SyncLocked();
  }

  absl::Status Current() const {
    return ToStatus(cudaSetDevice(ordinal_), "set device");
  }

  absl::Status SyncLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return ToStatus(cudaStreamSynchronize(stream_), "stream synchronize");
  }

  // The staging buffers and their events, made at first use.
  absl::Status PrepareStaging() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ZSHARD_RETURN_IF_ERROR(Current());
    CudaDevice* self = const_cast<CudaDevice*>(this);
    for (int b = 0; b < 2; ++b) {
      if (staging_[b].empty()) {
        ZSHARD_ASSIGN_OR_RETURN(
            self->staging_[b],
            self->Allocate(MemoryCategory::kStaging, kStagingBytes));
      }
      if (events_[b] == nullptr) {
        ZSHARD_RETURN_IF_ERROR(ToStatus(
            cudaEventCreateWithFlags(&self->events_[b], cudaEventDisableTiming),
            "event create"));
      }
    }
    return absl::OkStatus();
  }

  // Makes `buffer` hold at least `bytes`.
  absl::Status Grow(Buffer& buffer, MemoryCategory category, int64_t bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (buffer.size() >= bytes) return absl::OkStatus();
    buffer = Buffer();
    ZSHARD_ASSIGN_OR_RETURN(buffer, Allocate(category, bytes));
    return absl::OkStatus();
  }

  const int ordinal_;
  const cudaStream_t stream_;
  mutable absl::Mutex mu_;
  // Mutable: const copies to the host use them.
  mutable Buffer staging_[2] ABSL_GUARDED_BY(mu_);
  mutable cudaEvent_t events_[2] ABSL_GUARDED_BY(mu_) = {nullptr, nullptr};
  Buffer partials_ ABSL_GUARDED_BY(mu_);   // fp32 per block
  Buffer sums_ ABSL_GUARDED_BY(mu_);       // double, then int64, per segment
  Buffer sums_host_ ABSL_GUARDED_BY(mu_);  // their pinned copy
};

}  // namespace

absl::StatusOr<std::unique_ptr<Device>> OpenCudaDevice(int ordinal) {
  const int count = cuda::DeviceCount();
  if (ordinal < 0 || ordinal >= count) {
    return absl::FailedPreconditionError(
        absl::StrCat("cuda device ", ordinal, " is not present (", count,
                     count == 1 ? " device)" : " devices)"));
  }
  ZSHARD_RETURN_IF_ERROR(ToStatus(cudaSetDevice(ordinal), "set device"));
  cudaStream_t stream = nullptr;
  ZSHARD_RETURN_IF_ERROR(
      ToStatus(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
               "create stream"));
  return std::unique_ptr<Device>(new CudaDevice(ordinal, stream));
}

}  // namespace zshard::device
