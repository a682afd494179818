// EngineBuffers: one rank's memory for the ZeRO-1 step: the full, padded
// param and grad buffer of every plan buffer, and the fp32 optimizer state
// (master, exp_avg, exp_avg_sq) of its owned window of every bucket only,
// with exact byte accounting per category (the measured side of the ledger).
//
// Conventions (those of common/plan/ledger.h, so the figures compare
// exactly): the optimizer state of a bucket is one contiguous window
// [start, end) of the rank's shard, padding included; bf16/fp16 params keep
// an fp32 master copy of the window; fp32 params are their own master (the
// Adam update writes the param buffer's window in place) and hold no
// separate master.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "client/worker/engine/model_state.h"
#include "client/worker/engine/workload.h"
#include "client/worker/optim/adam.h"
#include "common/plan/model_spec.h"
#include "common/plan/plan.h"

namespace zshard::engine {

// Bytes held per category.
struct MemoryBytes {
  int64_t param = 0;
  int64_t grad = 0;
  int64_t master = 0;
  int64_t exp_avg = 0;
  int64_t exp_avg_sq = 0;
  int64_t comm = 0;  // engine-owned communication scratch
  int64_t total() const {
    return param + grad + master + exp_avg + exp_avg_sq + comm;
  }
};

// The owned window of one bucket and its fp32 state.
struct WindowState {
  int buffer = 0;
  int bucket = 0;
  int64_t start = 0;  // window in the buffer: [start, end)
  int64_t end = 0;
  std::vector<float> master;  // end - start; empty for fp32 params
  std::vector<float> exp_avg;
  std::vector<float> exp_avg_sq;
  // Pieces relative to start (no_weight_decay from the model spec);
  // elements covered by no segment are padding.
  std::vector<optim::Segment> segments;
  std::vector<plan::Piece> pieces;
  int64_t size() const { return end - start; }
};

// The full buffers of one plan buffer, in its dtypes.
struct BufferState {
  plan::BufferKey key;
  int64_t numel = 0;
  std::vector<uint8_t> params;  // numel * param dtype bytes
  std::vector<uint8_t> grads;   // numel * grad dtype bytes
};

// Owns the memory; not thread-safe. Also the ModelState a workload writes
// its gradients into.
class EngineBuffers final : public ModelState {
 public:
  // Allocates the buffers of `rank` under `plan` (made from `model`), sets
  // every param from workload.InitialParam rounded to its dtype and every
  // owned master to the rounded value; m and v start at 0. Expert buffers
  // hold the experts of this rank's expert-parallel rank (engine_groups.h):
  // `workload` must be this rank's. InvalidArgument for a bad rank;
  // ResourceExhausted when the buffers cannot be allocated.
  static absl::StatusOr<std::unique_ptr<EngineBuffers>> Create(
      const plan::ModelSpec& model, const plan::Plan& plan, int rank,
      const Workload& workload);

  const plan::ModelSpec& model() const { return model_; }
  const plan::Plan& plan() const { return plan_; }
  const plan::RankPlan& rank_plan() const { return rank_plan_; }
  std::vector<BufferState>& buffers() { return buffers_; }
  const std::vector<BufferState>& buffers() const { return buffers_; }
  // One window per shard of the rank plan, in the same order.
  std::vector<WindowState>& windows() { return windows_; }
  const std::vector<WindowState>& windows() const { return windows_; }

  // The fp32 master of window w: its own array, or the param buffer's window
  // for fp32 params.
  float* master(int w);
  const float* master(int w) const;

  // Bytes held per category (comm: `comm_bytes`, set by the engine).
  MemoryBytes memory() const;
  void set_comm_bytes(int64_t bytes) { comm_bytes_ = bytes; }

  // ModelState.
  std::vector<float> ReadParam(int p) const override;
  void WriteGrad(int p, absl::Span<const float> values) override;

 private:
  EngineBuffers(const plan::ModelSpec& model, const plan::Plan& plan, int rank);
  absl::Status Allocate(const Workload& workload);

  const plan::ModelSpec model_;
  const plan::Plan plan_;
  const plan::RankPlan rank_plan_;
  // Param index -> (buffer, slot) for ReadParam / WriteGrad.
  std::vector<std::pair<int, int>> slot_of_;
  std::vector<BufferState> buffers_;
  std::vector<WindowState> windows_;
  int64_t comm_bytes_ = 0;
};

}  // namespace zshard::engine
