// StepEngine: overlap_param_gather. After a step whose workload defers the
// all-gather (a trainer with forward pre-hooks), the buckets are gathered
// on their own thread in forward order while the trainer's next forward
// runs, each reported to the workload once its params are complete; the
// next step's first collective waits for the thread. Every bucket's gather
// is the same collective on the same values as before Step returned, so
// the params are bit-identical.
#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

#include "client/worker/engine/step_engine.h"

namespace zshard::engine {

std::vector<int> StepEngine::ForwardWindows() const {
  const std::vector<WindowState>& windows = buffers_->windows();
  // A buffer's params lie in reverse registration order, so its last
  // bucket holds the first params forward reaches.
  std::vector<std::pair<int, int>> first;  // (first param, window)
  for (size_t w = 0; w < windows.size(); ++w) {
    const plan::Buffer& b = config_.plan.buffers[windows[w].buffer];
    int p = std::numeric_limits<int>::max();
    for (const plan::ParamSlot& slot : b.params) {
      if (slot.bucket == windows[w].bucket) p = std::min(p, slot.param_index);
    }
    first.emplace_back(p, static_cast<int>(w));
  }
  std::stable_sort(first.begin(), first.end());
  std::vector<int> order;
  for (const auto& [p, w] : first) order.push_back(w);
  return order;
}

void StepEngine::StartGathers(Workload& workload) {
  (void)JoinGathers();
  gather_status_ = absl::OkStatus();
  const int64_t step = step_;
  gatherer_ = std::thread([this, &workload, step, order = ForwardWindows()]() {
    for (int w : order) {
      const WindowState& win = buffers_->windows()[w];
      if (gather_status_.ok() && groups_.shard_group(win.buffer) != nullptr) {
        gather_status_ = AllGather(w);
      }
      workload.ParamsGathered(step, win.buffer, win.bucket,
                              gather_status_.ok());
    }
  });
}

absl::Status StepEngine::JoinGathers() {
  if (gatherer_.joinable()) gatherer_.join();
  return gather_status_;
}

}  // namespace zshard::engine
