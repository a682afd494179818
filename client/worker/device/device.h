// Device: where one rank's step state lives and the few operations the step
// engine needs on it beside Adam: memory (allocated per category with exact
// byte accounting, freed by the Buffer's destructor), copies between host
// and device and on the device, zeroing, and the step's small kernels
// (cast of an fp32 master window into its param slice, squared norm and
// non-finite count of a grad slice, scaling). Two implementations: host
// memory (host_device.h) and CUDA (cuda_device.h, built with CUDA only);
// OpenDevice picks one. The engine, the state mover, the checkpoint files
// and the master dump are written once over this interface.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "client/worker/device/device_spec.h"
#include "client/worker/optim/adam.h"
#include "client/worker/optim/optimizer.h"
#include "common/plan/model_spec.h"

namespace zshard::device {

// What a buffer holds, for the ledger. Every category but kStaging is
// device memory; kStaging is host memory the device copies to and from
// fast (pinned on CUDA), outside the planner's prediction.
enum class MemoryCategory : uint8_t {
  kParam,
  kGrad,
  kMaster,
  kExpAvg,
  kExpAvgSq,
  kComm,  // communication and kernel scratch
  kStaging,
};
inline constexpr int kMemoryCategories = 7;

// "param", "grad", "master", "exp_avg", "exp_avg_sq", "comm", "staging".
const char* MemoryCategoryName(MemoryCategory category);

// Bytes held per category.
struct MemoryBytes {
  int64_t param = 0;
  int64_t grad = 0;
  int64_t master = 0;
  int64_t exp_avg = 0;
  int64_t exp_avg_sq = 0;
  int64_t comm = 0;
  int64_t staging = 0;
  // Device memory: every category but staging.
  int64_t total() const {
    return param + grad + master + exp_avg + exp_avg_sq + comm;
  }
};

// The squared norm and non-finite count of a grad segment.
struct GradStats {
  double sum_squares = 0;  // over the finite elements
  int64_t nonfinite = 0;
};

class Device;

// Memory of one category on one Device, freed (and taken off the ledger)
// on destruction. Move-only. The Device must outlive its buffers.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  ~Buffer();

  // Device memory (host memory for kStaging); null when size() is 0.
  void* data() const { return data_; }
  // data() + byte_offset.
  void* at(int64_t byte_offset) const {
    return static_cast<char*>(data_) + byte_offset;
  }
  int64_t size() const { return bytes_; }
  bool empty() const { return bytes_ == 0; }
  // The fd of the shared segment another process maps (AllocateShared on
  // the host device), owned by the device; -1 for private memory.
  int shared_fd() const { return shared_fd_; }
  MemoryCategory category() const { return category_; }

 private:
  friend class Device;
  void Reset();

  Device* device_ = nullptr;
  void* data_ = nullptr;
  int64_t bytes_ = 0;
  MemoryCategory category_ = MemoryCategory::kComm;
  int shared_fd_ = -1;
};

// Options of the Adam kernel a device makes (Device::CreateAdam).
struct AdamOptions {
  // Host: threads of CpuAdam (0: every hardware thread). Ignored on CUDA.
  // Default 0.
  int threads = 0;
};

// Thread-safe: the ledger is atomic and every operation may be called from
// any thread (the CUDA device serialises its staging buffers). Operations
// return when their effect is complete and visible to the host and to other
// streams (collectives), so callers never synchronise by hand; only the
// Optimizer of CreateAdam may leave work in flight (its Synchronize).
// Pointers named "device" point into this device's Buffers (not kStaging);
// "host" pointers are any host memory.
class Device {
 public:
  virtual ~Device() = default;
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const DeviceSpec& spec() const { return spec_; }

  // `bytes` (>= 0) of `category`, zeroed. ResourceExhausted when the
  // memory is not there; InvalidArgument for negative bytes.
  absl::StatusOr<Buffer> Allocate(MemoryCategory category, int64_t bytes);

  // The same in memory another process can map through the buffer's
  // shared_fd(): one memfd segment per buffer on the host device (nothing
  // is left behind when the processes exit, however they exit).
  // Unimplemented on devices whose memory is exported otherwise (CUDA IPC
  // handles: cuda_ipc.h), and for 0 bytes a buffer with no segment.
  absl::StatusOr<Buffer> AllocateShared(MemoryCategory category, int64_t bytes);

  // The ledger: bytes held now per category.
  MemoryBytes memory() const;

  // Bytes of memory this device has in all (host: physical memory).
  virtual int64_t capacity_bytes() const = 0;

  // Copies between host and device memory and inside the device.
  virtual absl::Status CopyToDevice(void* device_dst, const void* host_src,
                                    int64_t bytes) = 0;
  virtual absl::Status CopyToHost(void* host_dst, const void* device_src,
                                  int64_t bytes) const = 0;
  virtual absl::Status CopyOnDevice(void* device_dst, const void* device_src,
                                    int64_t bytes) = 0;
  virtual absl::Status Zero(void* device_dst, int64_t bytes) = 0;

  // param[i] = master[i] rounded to `param_dtype` as Adam rounds (nearest
  // even), for every i covered by a non-padding segment of `segments`
  // (relative to both pointers; empty: the whole [0, n)). For fp32 params
  // the values are copied (nothing to do when the pointers alias).
  // InvalidArgument for a bad table or null pointers with n > 0.
  absl::Status CastToParam(const float* master, void* param,
                           plan::DType param_dtype,
                           absl::Span<const optim::Segment> segments,
                           int64_t n);

  // out[k] = the squared norm (over the finite elements) and the count of
  // non-finite elements of segment k of `grad` (n elements of
  // `grad_dtype`); zero for padding segments. Each segment is summed in
  // blocks of 1024 elements from its begin: an fp32 partial sum per block
  // (in element order), the partials added in block order in double; a
  // block whose partial is not finite is summed again element by element in
  // double, counting the non-finite ones. Every device sums in this order,
  // so the results are bit-identical. InvalidArgument for a bad table, a
  // null pointer with n > 0 or out.size() != segments.size().
  absl::Status SumSquares(const void* grad, plan::DType grad_dtype,
                          absl::Span<const optim::Segment> segments, int64_t n,
                          absl::Span<GradStats> out);

  // data[i] = data[i] * factor (in fp32, rounded back to `dtype`) for i in
  // [0, n). InvalidArgument for n < 0 or a null pointer with n > 0.
  absl::Status Scale(void* data, plan::DType dtype, int64_t n, float factor);

  // Returns once every operation issued to this device is complete.
  virtual absl::Status Synchronize() = 0;

  // The Adam kernel for this device's memory (CpuAdam, CudaAdam on this
  // device's stream). Must not outlive the device.
  virtual absl::StatusOr<std::unique_ptr<optim::Optimizer>> CreateAdam(
      const AdamOptions& options) = 0;

 protected:
  explicit Device(DeviceSpec spec);

 private:
  friend class Buffer;
  // Raw memory of `bytes` > 0, zeroed; null when there is none.
  virtual void* Reserve(MemoryCategory category, int64_t bytes) = 0;
  virtual void Release(MemoryCategory category, void* data) = 0;
  // Whether ReserveShared can give memory another process maps by fd.
  // Default: no.
  virtual bool SupportsSharedMemory() const { return false; }
  // Shared memory of `bytes` > 0, zeroed, and its segment's fd; null when
  // there is none (always, unless SupportsSharedMemory). Released by
  // Release.
  virtual void* ReserveShared(MemoryCategory category, int64_t bytes, int* fd);
  // The kernels, on checked arguments.
  virtual absl::Status DoCastToParam(const float* master, void* param,
                                     plan::DType param_dtype,
                                     absl::Span<const optim::Segment> segments,
                                     int64_t n) = 0;
  virtual absl::Status DoSumSquares(const void* grad, plan::DType grad_dtype,
                                    absl::Span<const optim::Segment> segments,
                                    absl::Span<GradStats> out) = 0;
  virtual absl::Status DoScale(void* data, plan::DType dtype, int64_t n,
                               float factor) = 0;

  const DeviceSpec spec_;
  std::array<std::atomic<int64_t>, kMemoryCategories> ledger_{};
};

// The device of `spec`: the host device for cpu; for cuda the CUDA device
// of that ordinal (FailedPrecondition, as CheckDeviceUsable, when this
// build has no CUDA or the device is not there). The only place that knows
// which implementations this build has.
absl::StatusOr<std::unique_ptr<Device>> OpenDevice(const DeviceSpec& spec);

}  // namespace zshard::device
