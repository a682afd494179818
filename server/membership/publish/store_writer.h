// Group commit of the membership's store writes: each change queues its
// StoreWrite under the membership's lock (so in the order of the changes)
// and, after releasing the lock, waits until it is durable. The first
// waiter writes every queued change in one transaction while the others
// wait, so a storm of joins costs a few transactions instead of one each,
// and no store write happens under the lock that changes take. A failed
// transaction is not lost: its writes stay queued, ahead of later ones,
// and are written again by the next write or Retry; tickets count as
// durable only once a transaction holding them succeeded.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/state/state_store.h"

namespace zshard::server {

// Thread-safe. Borrows `store` (null: memory only, nothing is written); the
// store is used by one writer at a time.
class StoreWriter {
 public:
  // `on_durable` (may be empty) is called with the highest durable ticket
  // after every successful transaction, in order, from the writing thread
  // with no lock of the writer held.
  explicit StoreWriter(StateStore* store,
                       std::function<void(int64_t)> on_durable = {})
      : store_(store), on_durable_(std::move(on_durable)) {}

  // Queues `write`; returns its ticket (0 for an empty write: nothing to
  // wait for).
  int64_t Enqueue(StoreWrite write);
  // Returns once the write of `ticket` and every earlier one were tried:
  // durable, or failed (logged and kept queued for the next try).
  void WaitApplied(int64_t ticket);
  // Writes what earlier failures left queued, if nothing else is writing.
  void Retry();

  // `later` appended to `into` as if applied after it in one transaction.
  static void Merge(StoreWrite& into, StoreWrite later);

  // What the group commit did so far: changes queued, store transactions
  // (Apply calls) that wrote them, failed ones, and seconds spent in them.
  struct Stats {
    int64_t changes = 0;
    int64_t transactions = 0;
    int64_t failures = 0;
    double seconds = 0;
  };
  Stats stats();

 private:
  // Writes everything queued in one transaction; the caller holds mu_
  // and nothing else is writing. Releases mu_ around the store call.
  void WriteQueuedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  StateStore* const store_;
  const std::function<void(int64_t)> on_durable_;
  absl::Mutex mu_;
  std::deque<StoreWrite> queue_ ABSL_GUARDED_BY(mu_);
  int64_t queued_ ABSL_GUARDED_BY(mu_) = 0;   // tickets handed out
  int64_t applied_ ABSL_GUARDED_BY(mu_) = 0;  // tickets tried
  int64_t durable_ ABSL_GUARDED_BY(mu_) = 0;  // tickets written
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  Stats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace zshard::server
