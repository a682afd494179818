// The coordinator's durable state as the membership state machine sees it:
// a write batch applied in one transaction, and the state loaded at start.
// Implementations: SqliteStateStore (coordinator.db in --state-dir),
// EtcdStateStore (--store etcd:...), MemoryStateStore (tests), and
// LockedStateStore (one lock around another store, for several users).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/state/checkpoint_types.h"
#include "server/state/types.h"

namespace zshard::server {

// Status of a stored epoch row.
// kBroken: committed, then superseded before it became stable.
enum class EpochStatus { kProposed, kCommitted, kStable, kAbandoned, kBroken };
const char* EpochStatusName(EpochStatus status);

struct StoredEpoch {
  EpochPlan plan;
  EpochStatus status = EpochStatus::kProposed;
  // The row's moves are already stored and unchanged: keep them (saves
  // rewriting large move lists on every status change).
  bool moves_unchanged = false;
};

// Everything one state change writes; applied atomically.
struct StoreWrite {
  std::vector<Member> members;  // upserted by worker_id
  std::vector<std::string> deleted_members;
  std::vector<StoredEpoch> epochs;  // upserted by epoch number
  std::map<std::string, int64_t> meta;
  std::vector<Event> events;
  std::vector<CheckpointRecord> checkpoints;  // upserted by step

  bool empty() const {
    return members.empty() && deleted_members.empty() && epochs.empty() &&
           meta.empty() && events.empty() && checkpoints.empty();
  }
};

// The state found at start.
struct StoredState {
  std::string job_name;  // empty: a fresh state dir
  std::string job_spec_json;
  std::vector<Member> members;
  // The latest stable epoch (or, with none, the latest committed one) and
  // every later one.
  std::vector<StoredEpoch> epochs;
  std::map<std::string, int64_t> meta;
  // Committed checkpoints, oldest first.
  std::vector<CheckpointRecord> checkpoints;
  // The latest epochs (at most kHistoryEpochs) without their moves, oldest
  // first, for the reshard history.
  std::vector<StoredEpoch> history;
};

// Rendezvous values (RendezvousKv) by epoch, then key.
using RendezvousEntries = std::map<int64_t, std::map<std::string, std::string>>;

// Epochs loaded into StoredState::history.
inline constexpr int kHistoryEpochs = 256;

// Durable state. Thread-compatible: the membership calls it under its lock.
class StateStore {
 public:
  virtual ~StateStore() = default;
  // Reads everything written so far.
  virtual absl::StatusOr<StoredState> Load() = 0;
  // Records the job; FailedPrecondition if a different job is stored.
  virtual absl::Status SaveJob(const std::string& name,
                               const std::string& spec_json) = 0;
  // Applies the batch in one transaction (all or nothing).
  virtual absl::Status Apply(const StoreWrite& write) = 0;
  // The latest `limit` events, oldest first.
  virtual absl::StatusOr<std::vector<Event>> RecentEvents(int limit) = 0;

  // The rendezvous values of open transitions, so that a new leader serves
  // them: one write per value (the same key again replaces it).
  virtual absl::Status PutRendezvous(int64_t epoch, const std::string& key,
                                     const std::string& value) = 0;
  // Every stored rendezvous value.
  virtual absl::StatusOr<RendezvousEntries> LoadRendezvous() = 0;
  // Deletes the rendezvous values of every epoch below `epoch`.
  virtual absl::Status DropRendezvousBefore(int64_t epoch) = 0;
};

}  // namespace zshard::server
