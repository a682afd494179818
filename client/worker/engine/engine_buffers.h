// EngineBuffers: one rank's memory for the ZeRO-1 step, on the device of
// the engine (client/worker/device/): the full, padded param and grad
// buffer of every plan buffer, and the fp32 optimizer state (master,
// exp_avg, exp_avg_sq) of its owned window of every bucket only, with exact
// byte accounting per category from the device's ledger (the measured side
// of the ledger).
//
// Conventions (those of common/plan/ledger.h, so the figures compare
// exactly): the optimizer state of a bucket is one contiguous window
// [start, end) of the rank's shard, padding included; bf16/fp16 params keep
// an fp32 master copy of the window; fp32 params are their own master (the
// Adam update writes the param buffer's window in place) and hold no
// separate master.
//
// Every pointer these buffers hand out is device memory (host memory on the
// cpu device): read and write it through the device (device()) or the
// copies below, never by dereferencing, so the same code runs on every
// device.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "client/worker/device/device.h"
#include "client/worker/engine/model_state.h"
#include "client/worker/engine/workload.h"
#include "client/worker/optim/adam.h"
#include "common/plan/model_spec.h"
#include "common/plan/plan.h"

namespace zshard::engine {

// Device bytes held per category (the device's ledger): what telemetry
// reports and the live ledger compares with the planner's prediction.
// comm is engine-owned communication and kernel scratch; total() leaves
// out host staging.
using MemoryBytes = device::MemoryBytes;

// One of the three fp32 state arrays of a window.
enum class StateArray : uint8_t { kMaster, kExpAvg, kExpAvgSq };

// The owned window of one bucket and its fp32 state.
struct WindowState {
  int buffer = 0;
  int bucket = 0;
  int64_t start = 0;  // window in the buffer: [start, end)
  int64_t end = 0;
  device::Buffer master;  // end - start floats; empty for fp32 params
  device::Buffer exp_avg;
  device::Buffer exp_avg_sq;
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
  device::Buffer params;  // numel * param dtype bytes
  device::Buffer grads;   // numel * grad dtype bytes
};

// Owns the memory and its device; not thread-safe. Also the ModelState a
// workload writes its gradients into (through a staging copy).
class EngineBuffers final : public ModelState {
 public:
  // Opens `device` and allocates the buffers of `rank` under `plan` (made
  // from `model`) on it, sets every param from workload.InitialParam rounded
  // to its dtype and every owned master to the rounded value; m and v start
  // at 0. Expert buffers hold the experts of this rank's expert-parallel
  // rank (engine_groups.h): `workload` must be this rank's. InvalidArgument
  // for a bad rank; the device's status when it cannot be opened;
  // ResourceExhausted when the buffers do not fit in its memory. With
  // `shared`, the param and grad buffers are in memory another process maps
  // (shared_buffers(); the host device only: Unimplemented on others).
  static absl::StatusOr<std::unique_ptr<EngineBuffers>> Create(
      const plan::ModelSpec& model, const plan::Plan& plan, int rank,
      const Workload& workload, const device::DeviceSpec& device = {},
      bool shared = false);

  ~EngineBuffers() override;

  const plan::ModelSpec& model() const { return model_; }
  const plan::Plan& plan() const { return plan_; }
  const plan::RankPlan& rank_plan() const { return rank_plan_; }
  // The device every buffer lives on. Its operations do not change the
  // buffers' layout, so a const EngineBuffers lends it too.
  device::Device& device() const { return *device_; }
  std::vector<BufferState>& buffers() { return buffers_; }
  const std::vector<BufferState>& buffers() const { return buffers_; }
  // One window per shard of the rank plan, in the same order.
  std::vector<WindowState>& windows() { return windows_; }
  const std::vector<WindowState>& windows() const { return windows_; }

  // The fp32 master of window w (device memory): its own array, or the
  // param buffer's window for fp32 params.
  float* master(int w);
  const float* master(int w) const;
  // Array `a` of window w (device memory).
  float* state(StateArray a, int w);
  const float* state(StateArray a, int w) const;

  // Copies elements [offset, offset + n) of array `a` of window w to or
  // from host memory. The device's status on failure.
  absl::Status ReadState(StateArray a, int w, int64_t offset, int64_t n,
                         float* host) const;
  absl::Status WriteState(StateArray a, int w, int64_t offset, int64_t n,
                          const float* host);
  // Copies elements [from_offset, from_offset + n) of all three arrays of
  // window `from_w` of `from` into [offset, offset + n) of window w here,
  // device to device. InvalidArgument when `from` lives on another device.
  absl::Status CopyStateFrom(const EngineBuffers& from, int from_w,
                             int64_t from_offset, int w, int64_t offset,
                             int64_t n);

  // Device bytes held per category (the device's ledger; host staging is
  // not counted).
  MemoryBytes memory() const;

  // ModelState.
  absl::StatusOr<std::vector<float>> ReadParam(int p) const override;
  absl::Status WriteGrad(int p, absl::Span<const float> values) override;
  const SharedBuffers* shared_buffers() const override {
    return shared_ ? &shared_layout_ : nullptr;
  }

 private:
  EngineBuffers(const plan::ModelSpec& model, const plan::Plan& plan, int rank,
                std::unique_ptr<device::Device> device);
  absl::Status Allocate(bool shared);
  absl::Status Initialize(const Workload& workload);
  // The staging buffer (host memory the device copies fast), grown to at
  // least `bytes`, for ReadParam, WriteGrad and the initial values.
  absl::StatusOr<void*> Staging(int64_t bytes) const;

  const plan::ModelSpec model_;
  const plan::Plan plan_;
  const plan::RankPlan rank_plan_;
  // Declared first: the buffers below are freed before their device.
  std::unique_ptr<device::Device> device_;
  // Param index -> (buffer, slot) for ReadParam / WriteGrad.
  std::vector<std::pair<int, int>> slot_of_;
  std::vector<BufferState> buffers_;
  std::vector<WindowState> windows_;
  mutable device::Buffer staging_;
  bool shared_ = false;
  SharedBuffers shared_layout_;
};

}  // namespace zshard::engine
