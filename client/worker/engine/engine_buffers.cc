// EngineBuffers: allocation, initial values and byte accounting.
#include "client/worker/engine/engine_buffers.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/worker/engine/elements.h"
#include "common/status.h"

namespace zshard::engine {
namespace {

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

// Fails before allocating when the buffers cannot fit in this machine's
// physical memory: the kernel overcommits, so a too-large allocation would
// otherwise end in the OOM killer rather than in a status.
absl::Status CheckFitsInMemory(int64_t required, int rank) {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_size <= 0) return absl::OkStatus();
  const int64_t physical = int64_t{pages} * page_size;
  if (required <= physical) return absl::OkStatus();
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  return absl::ResourceExhaustedError(absl::StrFormat(
      "step engine: the buffers of rank %d need %.2f GiB but this machine "
      "has %.2f GiB of memory",
      rank, required / kGiB, physical / kGiB));
}

}  // namespace

EngineBuffers::EngineBuffers(const plan::ModelSpec& model,
                             const plan::Plan& plan, int rank)
    : model_(model),
      plan_(plan),
      rank_plan_(plan::MakeRankPlan(model, plan, rank)) {}

absl::StatusOr<std::unique_ptr<EngineBuffers>> EngineBuffers::Create(
    const plan::ModelSpec& model, const plan::Plan& plan, int rank,
    const Workload& workload) {
  ZSHARD_RETURN_IF_ERROR(plan::CheckRank(plan, rank));
  std::unique_ptr<EngineBuffers> buffers(new EngineBuffers(model, plan, rank));
  ZSHARD_RETURN_IF_ERROR(
      CheckFitsInMemory(RequiredBytes(plan, buffers->rank_plan()), rank));
  ZSHARD_RETURN_IF_ERROR(buffers->Allocate(workload));
  return buffers;
}

absl::Status EngineBuffers::Allocate(const Workload& workload) {
  slot_of_.assign(model_.params.size(), {-1, -1});
  // Allocation failures must become a status, not an exception escaping
  // the library: try/catch only here, at the allocation boundary.
  try {
    for (size_t bi = 0; bi < plan_.buffers.size(); ++bi) {
      const plan::Buffer& pb = plan_.buffers[bi];
      BufferState state;
      state.key = pb.key;
      state.numel = pb.numel;
      state.params.assign(pb.numel * plan::DTypeBytes(pb.key.param_dtype), 0);
      state.grads.assign(pb.numel * plan::DTypeBytes(pb.key.grad_dtype), 0);
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
      const plan::DType pd = plan_.buffers[shard.buffer].key.param_dtype;
      if (pd != plan::DType::kFp32) w.master.assign(w.size(), 0.0f);
      w.exp_avg.assign(w.size(), 0.0f);
      w.exp_avg_sq.assign(w.size(), 0.0f);
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
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(
        absl::StrCat("step engine: buffers of rank ", rank_plan_.rank,
                     " do not fit in memory"));
  } catch (const std::length_error&) {
    return absl::ResourceExhaustedError(
        absl::StrCat("step engine: buffers of rank ", rank_plan_.rank,
                     " do not fit in memory"));
  }
  // Initial params, rounded to their dtype; masters start as that value.
  for (size_t p = 0; p < model_.params.size(); ++p) {
    std::vector<float> values(model_.params[p].numel());
    workload.InitialParam(static_cast<int>(p), absl::MakeSpan(values));
    const auto [bi, si] = slot_of_[p];
    BufferState& b = buffers_[bi];
    const int64_t start = plan_.buffers[bi].params[si].start;
    for (size_t j = 0; j < values.size(); ++j) {
      StoreElement(b.key.param_dtype, b.params.data(), start + j, values[j]);
    }
  }
  for (WindowState& w : windows_) {
    if (w.master.empty()) continue;
    const BufferState& b = buffers_[w.buffer];
    for (int64_t i = 0; i < w.size(); ++i) {
      w.master[i] =
          LoadElement(b.key.param_dtype, b.params.data(), w.start + i);
    }
  }
  return absl::OkStatus();
}

float* EngineBuffers::master(int w) {
  WindowState& win = windows_[w];
  if (!win.master.empty() || win.size() == 0) return win.master.data();
  return reinterpret_cast<float*>(buffers_[win.buffer].params.data()) +
         win.start;
}

const float* EngineBuffers::master(int w) const {
  return const_cast<EngineBuffers*>(this)->master(w);
}

MemoryBytes EngineBuffers::memory() const {
  MemoryBytes m;
  for (const BufferState& b : buffers_) {
    m.param += static_cast<int64_t>(b.params.size());
    m.grad += static_cast<int64_t>(b.grads.size());
  }
  for (const WindowState& w : windows_) {
    m.master += static_cast<int64_t>(w.master.size() * sizeof(float));
    m.exp_avg += static_cast<int64_t>(w.exp_avg.size() * sizeof(float));
    m.exp_avg_sq += static_cast<int64_t>(w.exp_avg_sq.size() * sizeof(float));
  }
  m.comm = comm_bytes_;
  return m;
}

std::vector<float> EngineBuffers::ReadParam(int p) const {
  const auto [bi, si] = slot_of_[p];
  const BufferState& b = buffers_[bi];
  const plan::ParamSlot& slot = plan_.buffers[bi].params[si];
  std::vector<float> out(slot.end - slot.start);
  for (int64_t j = 0; j < slot.end - slot.start; ++j) {
    out[j] = LoadElement(b.key.param_dtype, b.params.data(), slot.start + j);
  }
  return out;
}

void EngineBuffers::WriteGrad(int p, absl::Span<const float> values) {
  const auto [bi, si] = slot_of_[p];
  BufferState& b = buffers_[bi];
  const int64_t start = plan_.buffers[bi].params[si].start;
  for (size_t j = 0; j < values.size(); ++j) {
    StoreElement(b.key.grad_dtype, b.grads.data(), start + j, values[j]);
  }
}

}  // namespace zshard::engine
