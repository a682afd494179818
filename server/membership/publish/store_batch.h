// The writes of one membership change, collected while it runs and handed
// to the StateStore in one transaction at its end.
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include "server/membership/members/member_table.h"
#include "server/state/checkpoint_types.h"
#include "server/state/state_store.h"
#include "server/state/types.h"

namespace zshard::server {

// Thread-compatible: the membership calls it under its lock. Borrows
// `store`; with a null store (memory only) every call does nothing.
class StoreBatch {
 public:
  explicit StoreBatch(StateStore* store) : store_(store) {}

  // Member `worker_id` changed: its record is written at Flush.
  void Dirty(const std::string& worker_id);
  // Member `worker_id` was forgotten: its record is deleted.
  void Forget(const std::string& worker_id);
  void AddEvent(const Event& event);
  void AddCheckpoint(const CheckpointRecord& record);
  // Writes `plan` with `status`. `moves_unchanged`: its moves are stored
  // already and are not written again (moves of an earlier write in this
  // batch stay in it).
  void SaveEpoch(const EpochPlan& plan, EpochStatus status,
                 bool moves_unchanged);
  void SetMeta(const std::string& key, int64_t value);

  // The batch with the dirty members' records from `members` (for the
  // StoreWriter); starts an empty one. Empty with a null store.
  StoreWrite Take(const MemberTable& members);

 private:
  StateStore* const store_;
  StoreWrite pending_;
  std::set<std::string> dirty_;
};

}  // namespace zshard::server
