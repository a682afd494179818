// The rendezvous key-value store behind RendezvousService: values scoped by
// epoch (the coordinator serves one job, so job scope is implied), with
// blocking reads bounded by deadlines and bounded sizes. With a StateStore
// every value is also written there (one store write per Set) and a new
// leader loads them, so a transition in flight completes across a failover.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/state/state_store.h"

namespace zshard::server {

struct RendezvousOptions {
  size_t max_key_bytes = 512;          // longer keys: InvalidArgument
  size_t max_value_bytes = 1 << 20;    // larger values: InvalidArgument
  size_t max_keys_per_epoch = 65536;   // more: ResourceExhausted
  size_t max_total_bytes = 256 << 20;  // over all epochs: ResourceExhausted
  int64_t max_timeout_ms = 300000;     // longer waits are clamped
  size_t max_wait_keys = 4096;         // Wait with more: InvalidArgument
};

// Thread-safe. Epoch validity is the caller's check (Membership::CheckEpoch);
// this class only keeps epochs apart, so a key set in one epoch is never
// visible in another.
class RendezvousKv {
 public:
  // Memory only; `store` (may be null) takes every value too.
  explicit RendezvousKv(RendezvousOptions options = {},
                        StateStore* store = nullptr)
      : options_(options), store_(store) {}
  // With `store` (may be null: memory only) and the values it holds.
  static absl::StatusOr<std::unique_ptr<RendezvousKv>> Open(
      RendezvousOptions options, StateStore* store);

  absl::Status Set(int64_t epoch, const std::string& key,
                   const std::string& value);

  // The value of `key` in `epoch`, waiting until it is set, `timeout`
  // passes (DeadlineExceeded), `cancelled()` turns true (Cancelled; polled
  // every 100 ms) or Shutdown (Unavailable).
  absl::StatusOr<std::string> Get(int64_t epoch, const std::string& key,
                                  absl::Duration timeout,
                                  const std::function<bool()>& cancelled);

  // Waits until every key is set in `epoch` (same ends as Get).
  absl::Status Wait(int64_t epoch, const std::vector<std::string>& keys,
                    absl::Duration timeout,
                    const std::function<bool()>& cancelled);

  // Forgets every epoch below `epoch` (in the store too: a failure there is
  // retried at the next call).
  void DropBefore(int64_t epoch);
  // Wakes every waiter with Unavailable; later waits fail at once.
  void Shutdown();

  size_t TotalBytes();

 private:
  absl::Status CheckKey(const std::string& key) const;
  absl::Status WaitFor(int64_t epoch, const std::vector<std::string>& keys,
                       absl::Duration timeout,
                       const std::function<bool()>& cancelled)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool HasAllLocked(int64_t epoch, const std::vector<std::string>& keys)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const RendezvousOptions options_;
  StateStore* const store_;
  absl::Mutex mu_;
  std::map<int64_t, std::map<std::string, std::string>> epochs_
      ABSL_GUARDED_BY(mu_);
  size_t total_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  // The store holds values of epochs below the ones in memory.
  bool store_stale_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace zshard::server
