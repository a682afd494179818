// HostDevice: the Device over host memory. Built with -ffp-contract=off,
// like the CUDA kernels with --fmad=false, so both round alike.
#include "client/worker/device/host_device.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/worker/device/shared_memory.h"
#include "client/worker/optim/cpu_adam.h"
#include "client/worker/optim/float_bits.h"
#include "common/status.h"

namespace zshard::device {
namespace {

constexpr int64_t kAlignment = 64;
constexpr int64_t kSumBlock = 1024;  // elements per fp32 partial sum

// The SumSquares order of device.h over elements [begin, end).
template <typename Load>
GradStats SumSquaresOf(Load load, int64_t begin, int64_t end) {
  GradStats out;
  for (int64_t i = begin; i < end; i += kSumBlock) {
    const int64_t stop = std::min(end, i + kSumBlock);
    float partial = 0;
    for (int64_t j = i; j < stop; ++j) {
      const float g = load(j);
      partial += g * g;
    }
    if (std::isfinite(partial)) {
      out.sum_squares += partial;
      continue;
    }
    for (int64_t j = i; j < stop; ++j) {  // rare: find the culprits
      const float g = load(j);
      if (std::isfinite(g)) {
        out.sum_squares += static_cast<double>(g) * g;
      } else {
        ++out.nonfinite;
      }
    }
  }
  return out;
}

// Calls fn(load) with the element loader of `dtype` over `data`.
template <typename Fn>
auto WithLoader(plan::DType dtype, const void* data, Fn fn) {
  if (dtype == plan::DType::kBf16) {
    const uint16_t* bits = static_cast<const uint16_t*>(data);
    return fn([bits](int64_t j) {
      return optim::Bf16BitsToFloat<float>(uint32_t{bits[j]});
    });
  }
  if (dtype == plan::DType::kFp16) {
    const uint16_t* bits = static_cast<const uint16_t*>(data);
    return fn([bits](int64_t j) { return optim::HalfBitsToFloat(bits[j]); });
  }
  const float* f = static_cast<const float*>(data);
  return fn([f](int64_t j) { return f[j]; });
}

// Stores `x` rounded to `dtype` as element i of `data`.
inline void Store(plan::DType dtype, void* data, int64_t i, float x) {
  if (dtype == plan::DType::kFp32) {
    static_cast<float*>(data)[i] = x;
  } else if (dtype == plan::DType::kBf16) {
    static_cast<uint16_t*>(data)[i] =
        static_cast<uint16_t>(optim::FloatToBf16Bits<float>(x));
  } else {
    static_cast<uint16_t*>(data)[i] =
        static_cast<uint16_t>(optim::FloatToHalfBits(x));
  }
}

class HostDevice final : public Device {
 public:
  HostDevice() : Device(DeviceSpec{}) {}

  int64_t capacity_bytes() const override {
    const long pages = sysconf(_SC_PHYS_PAGES);
    const long page_size = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page_size <= 0) return INT64_MAX;
    return int64_t{pages} * page_size;
  }

  absl::Status CopyToDevice(void* dst, const void* src,
                            int64_t bytes) override {
    if (bytes > 0) std::memcpy(dst, src, static_cast<size_t>(bytes));
    return absl::OkStatus();
  }
  absl::Status CopyToHost(void* dst, const void* src,
                          int64_t bytes) const override {
    if (bytes > 0) std::memcpy(dst, src, static_cast<size_t>(bytes));
    return absl::OkStatus();
  }
  absl::Status CopyOnDevice(void* dst, const void* src,
                            int64_t bytes) override {
    if (bytes > 0) std::memmove(dst, src, static_cast<size_t>(bytes));
    return absl::OkStatus();
  }
  absl::Status Zero(void* dst, int64_t bytes) override {
    if (bytes > 0) std::memset(dst, 0, static_cast<size_t>(bytes));
    return absl::OkStatus();
  }
  absl::Status Synchronize() override { return absl::OkStatus(); }

  absl::StatusOr<std::unique_ptr<optim::Optimizer>> CreateAdam(
      const AdamOptions& options) override {
    optim::CpuAdamOptions o;
    o.num_threads = options.threads;
    ZSHARD_ASSIGN_OR_RETURN(std::unique_ptr<optim::CpuAdam> adam,
                            optim::CpuAdam::Create(o));
    return std::unique_ptr<optim::Optimizer>(std::move(adam));
  }

 private:
  void* Reserve(MemoryCategory, int64_t bytes) override {
    const int64_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
    void* data = std::aligned_alloc(kAlignment, static_cast<size_t>(rounded));
    if (data != nullptr) std::memset(data, 0, static_cast<size_t>(rounded));
    return data;
  }
  bool SupportsSharedMemory() const override { return true; }
  void* ReserveShared(MemoryCategory category, int64_t bytes,
                      int* fd) override {
    absl::StatusOr<std::unique_ptr<SharedMemory>> segment =
        SharedMemory::Create(
            absl::StrCat("zshard-", MemoryCategoryName(category)),
            static_cast<size_t>(bytes));
    if (!segment.ok()) return nullptr;
    void* data = (*segment)->data();
    *fd = (*segment)->fd();
    absl::MutexLock lock(&mu_);
    shared_.emplace(data, *std::move(segment));
    return data;
  }
  void Release(MemoryCategory, void* data) override {
    {
      absl::MutexLock lock(&mu_);
      auto it = shared_.find(data);
      if (it != shared_.end()) {
        shared_.erase(it);  // unmaps and closes
        return;
      }
    }
    std::free(data);
  }

  absl::Mutex mu_;
  // The segments of AllocateShared, by their mapping.
  absl::flat_hash_map<void*, std::unique_ptr<SharedMemory>> shared_
      ABSL_GUARDED_BY(mu_);

  absl::Status DoCastToParam(const float* master, void* param,
                             plan::DType param_dtype,
                             absl::Span<const optim::Segment> segments,
                             int64_t) override {
    for (const optim::Segment& seg : segments) {
      if (seg.padding) continue;
      if (param_dtype == plan::DType::kFp32) {
        float* out = static_cast<float*>(param);
        if (out == master) continue;
        std::memmove(out + seg.begin, master + seg.begin,
                     static_cast<size_t>(seg.end - seg.begin) * sizeof(float));
        continue;
      }
      for (int64_t i = seg.begin; i < seg.end; ++i) {
        Store(param_dtype, param, i, master[i]);
      }
    }
    return absl::OkStatus();
  }

  absl::Status DoSumSquares(const void* grad, plan::DType grad_dtype,
                            absl::Span<const optim::Segment> segments,
                            absl::Span<GradStats> out) override {
    for (size_t k = 0; k < segments.size(); ++k) {
      const optim::Segment& seg = segments[k];
      if (seg.padding) continue;
      out[k] = WithLoader(grad_dtype, grad, [&seg](auto load) {
        return SumSquaresOf(load, seg.begin, seg.end);
      });
    }
    return absl::OkStatus();
  }

  absl::Status DoScale(void* data, plan::DType dtype, int64_t n,
                       float factor) override {
    WithLoader(dtype, data, [&](auto load) {
      for (int64_t i = 0; i < n; ++i) {
        Store(dtype, data, i, optim::ScaleKeepingNan(load(i), factor));
      }
      return 0;
    });
    return absl::OkStatus();
  }
};

}  // namespace

std::unique_ptr<Device> OpenHostDevice() {
  return std::make_unique<HostDevice>();
}

}  // namespace zshard::device
