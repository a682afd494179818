// A StateStore in memory with the SQLite store's semantics (what Load
// returns, upserts, moves_unchanged, event numbering, the job check), for
// the state machine's unit tests: a "restart" is a new Membership on the
// same MemoryStateStore.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "server/state/state_store.h"

namespace zshard::server {

// Thread-compatible, as the other stores.
class MemoryStateStore final : public StateStore {
 public:
  absl::StatusOr<StoredState> Load() override;
  absl::Status SaveJob(const std::string& name,
                       const std::string& spec_json) override;
  absl::Status Apply(const StoreWrite& write) override;
  absl::StatusOr<std::vector<Event>> RecentEvents(int limit) override;
  absl::Status PutRendezvous(int64_t epoch, const std::string& key,
                             const std::string& value) override;
  absl::StatusOr<RendezvousEntries> LoadRendezvous() override;
  absl::Status DropRendezvousBefore(int64_t epoch) override;

 private:
  std::string job_name_;
  std::string job_spec_json_;
  std::map<std::string, Member> members_;  // by worker_id
  std::map<int64_t, StoredEpoch> epochs_;
  std::map<std::string, int64_t> meta_;
  std::map<int64_t, Event> events_;  // by seq
  std::map<int64_t, CheckpointRecord> checkpoints_;
  RendezvousEntries rendezvous_;
};

}  // namespace zshard::server
