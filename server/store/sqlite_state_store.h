// The coordinator's durable state in SQLite: --state-dir/coordinator.db
// holds the job, members (with tokens), epochs, counters and events.
// WAL journal: a killed process (kill -9) loses no applied write.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/state/state_store.h"
#include "server/store/dir_lock.h"
#include "server/store/sqlite_db.h"

namespace zshard::server {

// Thread-compatible: the membership serialises calls under its lock.
class SqliteStateStore final : public StateStore {
 public:
  // Creates `state_dir` if needed, takes its lock (DirLock) and opens (or
  // creates) its database. FailedPrecondition naming the holder's pid when
  // another coordinator holds the directory; Unavailable when the directory
  // or file cannot be used.
  static absl::StatusOr<std::unique_ptr<SqliteStateStore>> Open(
      const std::string& state_dir);

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
  SqliteStateStore(std::unique_ptr<DirLock> lock, std::unique_ptr<SqliteDb> db)
      : lock_(std::move(lock)), db_(std::move(db)) {}
  absl::Status ApplyInTransaction(const StoreWrite& write);

  // Held for the store's life: one coordinator per state directory.
  std::unique_ptr<DirLock> lock_;
  std::unique_ptr<SqliteDb> db_;
};

}  // namespace zshard::server
