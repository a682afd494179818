// The in-memory store: maps with SQLite's load rules.
#include "server/store/memory_state_store.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace zshard::server {

absl::StatusOr<StoredState> MemoryStateStore::Load() {
  StoredState state;
  state.job_name = job_name_;
  state.job_spec_json = job_spec_json_;
  for (const auto& [id, m] : members_) state.members.push_back(m);
  std::stable_sort(
      state.members.begin(), state.members.end(),
      [](const Member& a, const Member& b) { return a.join_seq < b.join_seq; });
  // From the latest stable epoch (else the latest committed or broken one,
  // else 0) on, as SQLite.
  int64_t stable = -1, committed = -1;
  for (const auto& [n, e] : epochs_) {
    if (e.status == EpochStatus::kStable) stable = n;
    if (e.status == EpochStatus::kCommitted ||
        e.status == EpochStatus::kBroken) {
      committed = n;
    }
  }
  const int64_t from = stable >= 0 ? stable : committed >= 0 ? committed : 0;
  for (auto it = epochs_.lower_bound(from); it != epochs_.end(); ++it) {
    StoredEpoch e = it->second;
    e.moves_unchanged = false;
    state.epochs.push_back(std::move(e));
  }
  int skip =
      std::max<int>(0, static_cast<int>(epochs_.size()) - kHistoryEpochs);
  for (const auto& [n, e] : epochs_) {
    if (skip-- > 0) continue;
    StoredEpoch h = e;
    h.plan.moves.clear();
    h.moves_unchanged = false;
    state.history.push_back(std::move(h));
  }
  for (const auto& [step, c] : checkpoints_) state.checkpoints.push_back(c);
  state.meta = meta_;
  return state;
}

absl::Status MemoryStateStore::SaveJob(const std::string& name,
                                       const std::string& spec_json) {
  if (!job_name_.empty() && job_name_ != name) {
    return absl::FailedPreconditionError(absl::StrCat(
        "state dir holds job '", job_name_, "', not '", name, "'"));
  }
  job_name_ = name;
  job_spec_json_ = spec_json;
  return absl::OkStatus();
}

absl::Status MemoryStateStore::Apply(const StoreWrite& write) {
  for (const Member& m : write.members) members_[m.worker_id] = m;
  for (const std::string& id : write.deleted_members) members_.erase(id);
  for (const StoredEpoch& e : write.epochs) {
    StoredEpoch row = e;
    auto old = epochs_.find(e.plan.epoch);
    if (e.moves_unchanged && old != epochs_.end()) {
      row.plan.moves = old->second.plan.moves;
    } else if (e.moves_unchanged) {
      row.plan.moves.clear();
    }
    row.moves_unchanged = false;
    epochs_[e.plan.epoch] = std::move(row);
  }
  for (const auto& [key, value] : write.meta) meta_[key] = value;
  for (const Event& e : write.events) {
    Event stored = e;
    // As SQLite's row id: the given seq, else the next one.
    if (stored.seq <= 0) {
      stored.seq = events_.empty() ? 1 : events_.rbegin()->first + 1;
    }
    events_[stored.seq] = std::move(stored);
  }
  for (const CheckpointRecord& c : write.checkpoints) checkpoints_[c.step] = c;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Event>> MemoryStateStore::RecentEvents(int limit) {
  std::vector<Event> events;
  for (auto it = events_.rbegin();
       it != events_.rend() && static_cast<int>(events.size()) < limit; ++it) {
    events.push_back(it->second);
  }
  std::reverse(events.begin(), events.end());
  return events;
}

absl::Status MemoryStateStore::PutRendezvous(int64_t epoch,
                                             const std::string& key,
                                             const std::string& value) {
  rendezvous_[epoch][key] = value;
  return absl::OkStatus();
}

absl::StatusOr<RendezvousEntries> MemoryStateStore::LoadRendezvous() {
  return rendezvous_;
}

absl::Status MemoryStateStore::DropRendezvousBefore(int64_t epoch) {
  rendezvous_.erase(rendezvous_.begin(), rendezvous_.lower_bound(epoch));
  return absl::OkStatus();
}

}  // namespace zshard::server
