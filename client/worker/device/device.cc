// Device: buffers, the ledger and the argument checks of the kernels.
#include "client/worker/device/device.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace zshard::device {

const char* MemoryCategoryName(MemoryCategory category) {
  switch (category) {
    case MemoryCategory::kParam:
      return "param";
    case MemoryCategory::kGrad:
      return "grad";
    case MemoryCategory::kMaster:
      return "master";
    case MemoryCategory::kExpAvg:
      return "exp_avg";
    case MemoryCategory::kExpAvgSq:
      return "exp_avg_sq";
    case MemoryCategory::kComm:
      return "comm";
    case MemoryCategory::kStaging:
      return "staging";
  }
  return "invalid";
}

Buffer::Buffer(Buffer&& other) noexcept
    : device_(std::exchange(other.device_, nullptr)),
      data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)),
      category_(other.category_),
      shared_fd_(std::exchange(other.shared_fd_, -1)) {}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    Reset();
    device_ = std::exchange(other.device_, nullptr);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    category_ = other.category_;
    shared_fd_ = std::exchange(other.shared_fd_, -1);
  }
  return *this;
}

Buffer::~Buffer() { Reset(); }

void Buffer::Reset() {
  if (device_ != nullptr && data_ != nullptr) {
    device_->Release(category_, data_);
    device_->ledger_[static_cast<int>(category_)] -= bytes_;
  }
  device_ = nullptr;
  data_ = nullptr;
  bytes_ = 0;
  shared_fd_ = -1;
}

Device::Device(DeviceSpec spec) : spec_(spec) {
  for (std::atomic<int64_t>& bytes : ledger_) bytes = 0;
}

absl::StatusOr<Buffer> Device::Allocate(MemoryCategory category,
                                        int64_t bytes) {
  if (bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device ", DeviceSpecName(spec_), ": allocation of ", bytes, " bytes"));
  }
  Buffer buffer;
  buffer.category_ = category;
  if (bytes == 0) return buffer;
  void* data = Reserve(category, bytes);
  if (data == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "device ", DeviceSpecName(spec_), ": cannot allocate ", bytes,
        " bytes of ", MemoryCategoryName(category), " memory"));
  }
  buffer.device_ = this;
  buffer.data_ = data;
  buffer.bytes_ = bytes;
  ledger_[static_cast<int>(category)] += bytes;
  return buffer;
}

absl::StatusOr<Buffer> Device::AllocateShared(MemoryCategory category,
                                              int64_t bytes) {
  if (bytes <= 0) return Allocate(category, bytes);
  if (!SupportsSharedMemory()) {
    return absl::UnimplementedError(absl::StrCat(
        "device ", DeviceSpecName(spec_),
        ": no shared memory another process maps by fd (use CUDA IPC)"));
  }
  int fd = -1;
  void* data = ReserveShared(category, bytes, &fd);
  if (data == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "device ", DeviceSpecName(spec_), ": cannot allocate ", bytes,
        " bytes of shared ", MemoryCategoryName(category), " memory"));
  }
  Buffer buffer;
  buffer.category_ = category;
  buffer.device_ = this;
  buffer.data_ = data;
  buffer.bytes_ = bytes;
  buffer.shared_fd_ = fd;
  ledger_[static_cast<int>(category)] += bytes;
  return buffer;
}

void* Device::ReserveShared(MemoryCategory, int64_t, int*) { return nullptr; }

MemoryBytes Device::memory() const {
  auto of = [this](MemoryCategory c) {
    return ledger_[static_cast<int>(c)].load();
  };
  MemoryBytes m;
  m.param = of(MemoryCategory::kParam);
  m.grad = of(MemoryCategory::kGrad);
  m.master = of(MemoryCategory::kMaster);
  m.exp_avg = of(MemoryCategory::kExpAvg);
  m.exp_avg_sq = of(MemoryCategory::kExpAvgSq);
  m.comm = of(MemoryCategory::kComm);
  m.staging = of(MemoryCategory::kStaging);
  return m;
}

namespace {

absl::Status CheckSlice(const char* kernel, const void* a, const void* b,
                        int64_t n) {
  if (n < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(kernel, ": slice length ", n, " is negative"));
  }
  if (n > 0 && (a == nullptr || b == nullptr)) {
    return absl::InvalidArgumentError(
        absl::StrCat(kernel, ": null pointer for a slice of ", n, " elements"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Device::CastToParam(const float* master, void* param,
                                 plan::DType param_dtype,
                                 absl::Span<const optim::Segment> segments,
                                 int64_t n) {
  ZSHARD_RETURN_IF_ERROR(CheckSlice("cast to param", master, param, n));
  absl::Status valid = optim::ValidateSegments(segments, n);
  if (!valid.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cast to param: ", valid.message()));
  }
  const optim::Segment whole{0, n, false, false};
  if (segments.empty()) segments = absl::MakeConstSpan(&whole, 1);
  if (n == 0) return absl::OkStatus();
  return DoCastToParam(master, param, param_dtype, segments, n);
}

absl::Status Device::SumSquares(const void* grad, plan::DType grad_dtype,
                                absl::Span<const optim::Segment> segments,
                                int64_t n, absl::Span<GradStats> out) {
  ZSHARD_RETURN_IF_ERROR(CheckSlice("sum of squares", grad, grad, n));
  absl::Status valid = optim::ValidateSegments(segments, n);
  if (!valid.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("sum of squares: ", valid.message()));
  }
  if (out.size() != segments.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("sum of squares: ", out.size(), " results for ",
                     segments.size(), " segments"));
  }
  for (GradStats& s : out) s = GradStats{};
  if (segments.empty() || n == 0) return absl::OkStatus();
  return DoSumSquares(grad, grad_dtype, segments, out);
}

absl::Status Device::Scale(void* data, plan::DType dtype, int64_t n,
                           float factor) {
  ZSHARD_RETURN_IF_ERROR(CheckSlice("scale", data, data, n));
  if (n == 0) return absl::OkStatus();
  return DoScale(data, dtype, n, factor);
}

}  // namespace zshard::device
