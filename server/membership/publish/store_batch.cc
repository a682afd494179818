// The membership's write batch.
#include "server/membership/publish/store_batch.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace zshard::server {

void StoreBatch::Dirty(const std::string& worker_id) {
  if (store_ != nullptr) dirty_.insert(worker_id);
}

void StoreBatch::Forget(const std::string& worker_id) {
  dirty_.erase(worker_id);
  if (store_ != nullptr) pending_.deleted_members.push_back(worker_id);
}

void StoreBatch::AddEvent(const Event& event) {
  if (store_ != nullptr) pending_.events.push_back(event);
}

void StoreBatch::AddCheckpoint(const CheckpointRecord& record) {
  if (store_ != nullptr) pending_.checkpoints.push_back(record);
}

void StoreBatch::SaveEpoch(const EpochPlan& plan, EpochStatus status,
                           bool moves_unchanged) {
  if (store_ == nullptr) return;
  for (StoredEpoch& e : pending_.epochs) {
    if (e.plan.epoch == plan.epoch) {
      // Moves not yet written stay in the batch.
      e = StoredEpoch{plan, status, moves_unchanged && e.moves_unchanged};
      return;
    }
  }
  StoredEpoch e{plan, status, moves_unchanged};
  // Moves already stored are not copied again.
  if (moves_unchanged) e.plan.moves.clear();
  pending_.epochs.push_back(std::move(e));
}

void StoreBatch::SetMeta(const std::string& key, int64_t value) {
  if (store_ != nullptr) pending_.meta[key] = value;
}

StoreWrite StoreBatch::Take(const MemberTable& members) {
  if (store_ == nullptr) return StoreWrite();
  for (const std::string& id : dirty_) {
    const Member* m = members.Find(id);
    if (m != nullptr) pending_.members.push_back(MemberTable::Copy(*m));
  }
  dirty_.clear();
  StoreWrite out = std::move(pending_);
  pending_ = StoreWrite();
  return out;
}

}  // namespace zshard::server
