// EngineBuffers: allocation on the device, initial values, the copies of
// state and params between the device and the host, byte accounting.
#include "client/worker/engine/engine_buffers.h"

#include <algorithm>
#include <atomic>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/worker/device/cuda_ipc.h"
#include "client/worker/engine/elements.h"
#include "common/status.h"

namespace zshard::engine {
namespace {

using device::MemoryCategory;

// Elements converted per staging copy (ReadParam, WriteGrad, the initial
// values): the staging buffer holds at most this many fp32 values' bytes.
constexpr int64_t kStagingElements = int64_t{1} << 20;

// Bytes the buffers of `rank_plan` take: the full param and grad buffers,
// and fp32 master (bf16/fp16 params only), m and v for the owned windows.
int64_t RequiredBytes(const plan::Plan& plan, const plan::RankPlan& rank_plan) {
  int64_t bytes = 0;
  for (const plan::Buffer& b : plan.buffers) {
    bytes += b.numel * (plan::DTypeBytes(b.key.param_dtype) +
                        plan::DTypeBytes(b.key.grad_dtype));
  }
  for (const plan::Shard& shard : rank_plan.shards) {
    const bool own_master =
        plan.buffers[shard.buffer].key.param_dtype != plan::DType::kFp32;
    bytes += (shard.end - shard.start) * (own_master ? 12 : 8);
  }
  return bytes;
}

// Fails before allocating when the buffers cannot fit in the device's
// memory: the host kernel overcommits, so a too-large allocation would
// otherwise end in the OOM killer rather than in a status.
absl::Status CheckFitsInMemory(const device::Device& device, int64_t required,
                               int rank) {
  const int64_t capacity = device.capacity_bytes();
  if (required <= capacity) return absl::OkStatus();
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  return absl::ResourceExhaustedError(absl::StrFormat(
      "step engine: the buffers of rank %d need %.2f GiB but device %s has "
      "%.2f GiB of memory",
      rank, required / kGiB, device::DeviceSpecName(device.spec()),
      capacity / kGiB));
}

}  // namespace

EngineBuffers::EngineBuffers(const plan::ModelSpec& model,
                             const plan::Plan& plan, int rank,
                             std::unique_ptr<device::Device> device)
    : model_(model),
      plan_(plan),
      rank_plan_(plan::MakeRankPlan(model, plan, rank)),
      device_(std::move(device)) {}

EngineBuffers::~EngineBuffers() = default;

absl::StatusOr<std::unique_ptr<EngineBuffers>> EngineBuffers::Create(
    const plan::ModelSpec& model, const plan::Plan& plan, int rank,
    const Workload& workload, const device::DeviceSpec& device, bool shared) {
  ZSHARD_RETURN_IF_ERROR(plan::CheckRank(plan, rank));
  ZSHARD_ASSIGN_OR_RETURN(std::unique_ptr<device::Device> dev,
                          device::OpenDevice(device));
  std::unique_ptr<EngineBuffers> buffers(
      new EngineBuffers(model, plan, rank, std::move(dev)));
  ZSHARD_RETURN_IF_ERROR(CheckFitsInMemory(
      *buffers->device_, RequiredBytes(plan, buffers->rank_plan()), rank));
  absl::Status allocated = buffers->Allocate(shared);
  if (!allocated.ok()) {
    return absl::Status(allocated.code(),
                        absl::StrCat("step engine: buffers of rank ", rank,
                                     ": ", allocated.message()));
  }
  ZSHARD_RETURN_IF_ERROR(buffers->Initialize(workload));
  return buffers;
}

absl::Status EngineBuffers::Allocate(bool shared) {
  device::Device& dev = *device_;
  // Each set of shared buffers is a new generation for the process that
  // maps them.
  static std::atomic<int64_t> generations{0};
  shared_ = shared;
  if (shared) shared_layout_.generation = ++generations;
  // Device memory is shared through CUDA IPC handles of whole allocations
  // (one per buffer), host memory through memfd segments.
  const bool ipc = shared && dev.spec().kind == device::DeviceKind::kCuda;
  if (ipc) shared_layout_.cuda_device = dev.spec().ordinal;
  auto allocate = [&](MemoryCategory c, int64_t bytes) {
    return shared && !ipc ? dev.AllocateShared(c, bytes)
                          : dev.Allocate(c, bytes);
  };
  auto handle = [](const device::Buffer& b) -> absl::StatusOr<std::string> {
    ZSHARD_ASSIGN_OR_RETURN(device::CudaIpcHandle h,
                            device::ExportCudaIpcHandle(b.data()));
    return std::string(h.bytes.begin(), h.bytes.end());
  };
  slot_of_.assign(model_.params.size(), {-1, -1});
  for (size_t bi = 0; bi < plan_.buffers.size(); ++bi) {
    const plan::Buffer& pb = plan_.buffers[bi];
    BufferState state;
    state.key = pb.key;
    state.numel = pb.numel;
    ZSHARD_ASSIGN_OR_RETURN(
        state.params,
        allocate(MemoryCategory::kParam,
                 pb.numel * plan::DTypeBytes(pb.key.param_dtype)));
    ZSHARD_ASSIGN_OR_RETURN(
        state.grads, allocate(MemoryCategory::kGrad,
                              pb.numel * plan::DTypeBytes(pb.key.grad_dtype)));
    if (shared) {
      SharedBuffers::Buffer view;
      view.key = pb.key;
      view.numel = pb.numel;
      if (ipc) {
        ZSHARD_ASSIGN_OR_RETURN(view.param_ipc, handle(state.params));
        ZSHARD_ASSIGN_OR_RETURN(view.grad_ipc, handle(state.grads));
      } else {
        view.param_fd = state.params.shared_fd();
        view.grad_fd = state.grads.shared_fd();
      }
      for (const plan::ParamSlot& slot : pb.params) {
        view.param_starts.emplace_back(model_.params[slot.param_index].name,
                                       slot.start);
      }
      for (const plan::Bucket& bucket : pb.buckets) {
        view.buckets.emplace_back(bucket.start, bucket.end);
      }
      shared_layout_.buffers.push_back(std::move(view));
    }
    buffers_.push_back(std::move(state));
    for (size_t s = 0; s < pb.params.size(); ++s) {
      slot_of_[pb.params[s].param_index] = {static_cast<int>(bi),
                                            static_cast<int>(s)};
    }
  }
  for (const plan::Shard& shard : rank_plan_.shards) {
    WindowState w;
    w.buffer = shard.buffer;
    w.bucket = shard.bucket;
    w.start = shard.start;
    w.end = shard.end;
    const int64_t bytes = w.size() * int64_t{sizeof(float)};
    const plan::DType pd = plan_.buffers[shard.buffer].key.param_dtype;
    if (pd != plan::DType::kFp32) {
      ZSHARD_ASSIGN_OR_RETURN(w.master,
                              dev.Allocate(MemoryCategory::kMaster, bytes));
    }
    ZSHARD_ASSIGN_OR_RETURN(w.exp_avg,
                            dev.Allocate(MemoryCategory::kExpAvg, bytes));
    ZSHARD_ASSIGN_OR_RETURN(w.exp_avg_sq,
                            dev.Allocate(MemoryCategory::kExpAvgSq, bytes));
    w.pieces = shard.pieces;
    for (const plan::Piece& piece : shard.pieces) {
      optim::Segment seg;
      seg.begin = piece.start - shard.start;
      seg.end = piece.end - shard.start;
      seg.no_weight_decay = model_.params[piece.param_index].no_weight_decay;
      w.segments.push_back(seg);
    }
    windows_.push_back(std::move(w));
  }
  return absl::OkStatus();
}

absl::Status EngineBuffers::Initialize(const Workload& workload) {
  // Initial params, rounded to their dtype (the buffers start zeroed:
  // padding stays 0).
  for (size_t p = 0; p < model_.params.size(); ++p) {
    std::vector<float> values(model_.params[p].numel());
    workload.InitialParam(static_cast<int>(p), absl::MakeSpan(values));
    const auto [bi, si] = slot_of_[p];
    BufferState& b = buffers_[bi];
    const int64_t pb = plan::DTypeBytes(b.key.param_dtype);
    const int64_t n = static_cast<int64_t>(values.size());
    const int64_t start = plan_.buffers[bi].params[si].start;
    for (int64_t at = 0; at < n; at += kStagingElements) {
      const int64_t m = std::min(kStagingElements, n - at);
      ZSHARD_ASSIGN_OR_RETURN(void* host, Staging(m * pb));
      for (int64_t j = 0; j < m; ++j) {
        StoreElement(b.key.param_dtype, host, j, values[at + j]);
      }
      ZSHARD_RETURN_IF_ERROR(
          device_->CopyToDevice(b.params.at((start + at) * pb), host, m * pb));
    }
  }
  // Masters start as the rounded params they shadow.
  std::vector<float> master;
  for (size_t w = 0; w < windows_.size(); ++w) {
    const WindowState& win = windows_[w];
    if (win.master.empty()) continue;
    const BufferState& b = buffers_[win.buffer];
    const int64_t pb = plan::DTypeBytes(b.key.param_dtype);
    for (int64_t at = 0; at < win.size(); at += kStagingElements) {
      const int64_t m = std::min(kStagingElements, win.size() - at);
      ZSHARD_ASSIGN_OR_RETURN(void* host, Staging(m * pb));
      ZSHARD_RETURN_IF_ERROR(device_->CopyToHost(
          host, b.params.at((win.start + at) * pb), m * pb));
      master.resize(m);
      for (int64_t i = 0; i < m; ++i) {
        master[i] = LoadElement(b.key.param_dtype, host, i);
      }
      ZSHARD_RETURN_IF_ERROR(WriteState(
          StateArray::kMaster, static_cast<int>(w), at, m, master.data()));
    }
  }
  // The staging buffer stays for the workload's reads and writes.
  return absl::OkStatus();
}

absl::StatusOr<void*> EngineBuffers::Staging(int64_t bytes) const {
  if (staging_.size() < bytes) {
    staging_ = device::Buffer();
    ZSHARD_ASSIGN_OR_RETURN(staging_,
                            device_->Allocate(MemoryCategory::kStaging, bytes));
  }
  return staging_.data();
}

float* EngineBuffers::master(int w) {
  WindowState& win = windows_[w];
  if (!win.master.empty() || win.size() == 0) {
    return static_cast<float*>(win.master.data());
  }
  return static_cast<float*>(buffers_[win.buffer].params.data()) + win.start;
}

const float* EngineBuffers::master(int w) const {
  return const_cast<EngineBuffers*>(this)->master(w);
}

float* EngineBuffers::state(StateArray a, int w) {
  switch (a) {
    case StateArray::kMaster:
      break;
    case StateArray::kExpAvg:
      return static_cast<float*>(windows_[w].exp_avg.data());
    case StateArray::kExpAvgSq:
      return static_cast<float*>(windows_[w].exp_avg_sq.data());
  }
  return master(w);
}

const float* EngineBuffers::state(StateArray a, int w) const {
  return const_cast<EngineBuffers*>(this)->state(a, w);
}

absl::Status EngineBuffers::ReadState(StateArray a, int w, int64_t offset,
                                      int64_t n, float* host) const {
  if (n <= 0) return absl::OkStatus();
  return device_->CopyToHost(host, state(a, w) + offset,
                             n * int64_t{sizeof(float)});
}

absl::Status EngineBuffers::WriteState(StateArray a, int w, int64_t offset,
                                       int64_t n, const float* host) {
  if (n <= 0) return absl::OkStatus();
  return device_->CopyToDevice(state(a, w) + offset, host,
                               n * int64_t{sizeof(float)});
}

absl::Status EngineBuffers::CopyStateFrom(const EngineBuffers& from, int from_w,
                                          int64_t from_offset, int w,
                                          int64_t offset, int64_t n) {
  if (from.device().spec() != device_->spec()) {
    return absl::InvalidArgumentError(
        absl::StrCat("step engine: state on device ",
                     device::DeviceSpecName(from.device().spec()),
                     " cannot be copied to buffers on device ",
                     device::DeviceSpecName(device_->spec())));
  }
  if (n <= 0) return absl::OkStatus();
  for (const StateArray a :
       {StateArray::kMaster, StateArray::kExpAvg, StateArray::kExpAvgSq}) {
    ZSHARD_RETURN_IF_ERROR(device_->CopyOnDevice(
        state(a, w) + offset, from.state(a, from_w) + from_offset,
        n * int64_t{sizeof(float)}));
  }
  return absl::OkStatus();
}

MemoryBytes EngineBuffers::memory() const { return device_->memory(); }

absl::StatusOr<std::vector<float>> EngineBuffers::ReadParam(int p) const {
  const auto [bi, si] = slot_of_[p];
  const BufferState& b = buffers_[bi];
  const plan::ParamSlot& slot = plan_.buffers[bi].params[si];
  const int64_t pb = plan::DTypeBytes(b.key.param_dtype);
  const int64_t n = slot.end - slot.start;
  std::vector<float> out(n);
  for (int64_t at = 0; at < n; at += kStagingElements) {
    const int64_t m = std::min(kStagingElements, n - at);
    ZSHARD_ASSIGN_OR_RETURN(void* host, Staging(m * pb));
    ZSHARD_RETURN_IF_ERROR(
        device_->CopyToHost(host, b.params.at((slot.start + at) * pb), m * pb));
    for (int64_t j = 0; j < m; ++j) {
      out[at + j] = LoadElement(b.key.param_dtype, host, j);
    }
  }
  return out;
}

absl::Status EngineBuffers::WriteGrad(int p, absl::Span<const float> values) {
  const auto [bi, si] = slot_of_[p];
  BufferState& b = buffers_[bi];
  const int64_t start = plan_.buffers[bi].params[si].start;
  const int64_t gb = plan::DTypeBytes(b.key.grad_dtype);
  const int64_t n = static_cast<int64_t>(values.size());
  for (int64_t at = 0; at < n; at += kStagingElements) {
    const int64_t m = std::min(kStagingElements, n - at);
    ZSHARD_ASSIGN_OR_RETURN(void* host, Staging(m * gb));
    for (int64_t j = 0; j < m; ++j) {
      StoreElement(b.key.grad_dtype, host, j, values[at + j]);
    }
    ZSHARD_RETURN_IF_ERROR(
        device_->CopyToDevice(b.grads.at((start + at) * gb), host, m * gb));
  }
  return absl::OkStatus();
}

}  // namespace zshard::engine
