// One lock around another StateStore, for a store with several users: the
// membership's writer and the rendezvous store write from their own
// threads, and the stores themselves are thread-compatible only.
#pragma once

#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "server/state/state_store.h"

namespace zshard::server {

// Thread-safe. Borrows `store`, which must outlive it.
class LockedStateStore final : public StateStore {
 public:
  explicit LockedStateStore(StateStore* store) : store_(store) {}

  absl::StatusOr<StoredState> Load() override {
    absl::MutexLock lock(&mu_);
    return store_->Load();
  }
  absl::Status SaveJob(const std::string& name,
                       const std::string& spec_json) override {
    absl::MutexLock lock(&mu_);
    return store_->SaveJob(name, spec_json);
  }
  absl::Status Apply(const StoreWrite& write) override {
    absl::MutexLock lock(&mu_);
    return store_->Apply(write);
  }
  absl::StatusOr<std::vector<Event>> RecentEvents(int limit) override {
    absl::MutexLock lock(&mu_);
    return store_->RecentEvents(limit);
  }
  absl::Status PutRendezvous(int64_t epoch, const std::string& key,
                             const std::string& value) override {
    absl::MutexLock lock(&mu_);
    return store_->PutRendezvous(epoch, key, value);
  }
  absl::StatusOr<RendezvousEntries> LoadRendezvous() override {
    absl::MutexLock lock(&mu_);
    return store_->LoadRendezvous();
  }
  absl::Status DropRendezvousBefore(int64_t epoch) override {
    absl::MutexLock lock(&mu_);
    return store_->DropRendezvousBefore(epoch);
  }

 private:
  StateStore* const store_;
  absl::Mutex mu_;
};

}  // namespace zshard::server
