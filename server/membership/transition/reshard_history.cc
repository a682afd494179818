// The reshard history's lines.
#include "server/membership/transition/reshard_history.h"

#include <algorithm>
#include <utility>

namespace zshard::server {

void ReshardHistory::Record(const EpochPlan& p, const std::string& outcome) {
  ReshardRecord r;
  r.epoch = p.epoch;
  r.base_epoch = p.base_epoch;
  r.reason = p.reason;
  r.world_before = p.world_before;
  r.world_after = p.world;
  r.instances = p.instances;
  r.moves = p.summary.moves;
  r.bytes_moved = p.summary.bytes_moved;
  r.lower_bound_bytes = p.summary.lower_bound_bytes;
  r.bytes_from_checkpoint = p.summary.bytes_from_checkpoint;
  r.bytes_same_node = p.summary.bytes_same_node;
  r.restored_step = p.restore.active() ? p.restore.step : -1;
  r.proposed_ms = p.proposed_ms;
  r.duration_ms = p.duration_ms;
  r.outcome = outcome;
  // Newest last; an epoch's line is updated in place.
  for (auto it = lines_.rbegin(); it != lines_.rend(); ++it) {
    if (it->epoch == p.epoch) {
      *it = std::move(r);
      return;
    }
    if (it->epoch < p.epoch) break;
  }
  lines_.push_back(std::move(r));
  while (static_cast<int>(lines_.size()) > std::max(1, capacity_)) {
    lines_.pop_front();
  }
}

std::vector<ReshardRecord> ReshardHistory::Latest(int limit) const {
  size_t n = lines_.size();
  size_t first = limit > 0 && static_cast<size_t>(limit) < n ? n - limit : 0;
  return std::vector<ReshardRecord>(lines_.begin() + first, lines_.end());
}

}  // namespace zshard::server
