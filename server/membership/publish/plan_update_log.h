// The plan updates streamed to workers (WatchPlan): a bounded log of
// numbered updates, the snapshot a new or lagging watcher gets, and the
// waiters.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/membership/publish/durable_gate.h"
#include "server/membership/transition/epoch_transition.h"
#include "server/state/types.h"

namespace zshard::server {

// Plan updates for a watcher: `updates` in order, and the sequence number
// to wait after next time.
struct WatchBatch {
  // Shared and immutable: many watchers hold the same updates.
  std::vector<std::shared_ptr<const PlanUpdate>> updates;
  int64_t last_seq = 0;
  bool shutdown = false;
};

// Thread-safe, with a lock of its own that writers take last, so that many
// watchers never queue up in front of heartbeats. Publish, Snapshot and
// Seal must not run concurrently with each other (the membership calls
// them under its lock). What they publish is staged: watchers see it once
// Seal's ticket is durable (Release), so no watcher ever learns of an
// epoch the store may not hold.
class PlanUpdateLog {
 public:
  // Keeps the latest `capacity` updates (at least 1).
  explicit PlanUpdateLog(int capacity) : capacity_(capacity) {}

  // Stages `plan` in `phase` as the next update, with `now`'s epochs as
  // the snapshot (see Snapshot); once shown, both appear at once and every
  // waiter wakes. The snapshot shares the update itself where it is the
  // same epoch and phase.
  void Publish(PlanPhase phase, const EpochPlan& plan,
               const EpochTransition& now);
  // Stages the snapshot, what a new watcher gets first, from `now`: the
  // committed epoch (its moves until it is stable), then the proposal in
  // flight or the last abandoned one; each numbered with the latest
  // update's seq. Before a proposal, the last ABANDONED published since
  // the committed epoch: workers resume on it, so a watcher that fell
  // behind must resume as the others did before it stops again.
  void Snapshot(const EpochTransition& now);
  // What was staged since the last Seal is shown once the StoreWriter's
  // `ticket` is durable (0: at once).
  void Seal(int64_t ticket);
  // The StoreWriter's tickets up to `durable` are durable.
  void Release(int64_t durable);

  // Updates after `after_seq` (negative: a snapshot; so is falling behind
  // the log). Blocks up to `timeout` when there are none; returns early
  // with shutdown set after Shutdown().
  WatchBatch Wait(int64_t after_seq, absl::Duration timeout);
  // Wakes every waiter; later waits return at once.
  void Shutdown();

 private:
  struct Snapshots {
    std::shared_ptr<const PlanUpdate> committed, abandoned, pending;
  };
  // A staged Publish (with its update) or Snapshot (without).
  struct Staged {
    std::shared_ptr<const PlanUpdate> update;
    Snapshots snap;
  };
  void ShowLocked(std::vector<Staged> shown) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What Snapshot describes, numbered `seq`; `latest` (may be null) is
  // shared where it is one of them.
  // `abandoned` (may be null) is the last ABANDONED published.
  static Snapshots MakeSnapshots(
      int64_t seq, const EpochTransition& now,
      const std::shared_ptr<const PlanUpdate>& latest,
      const std::shared_ptr<const PlanUpdate>& abandoned);

  const int capacity_;
  absl::Mutex mu_;
  absl::CondVar cv_;
  std::deque<std::shared_ptr<const PlanUpdate>> log_ ABSL_GUARDED_BY(mu_);
  DurableGate<Staged> gate_ ABSL_GUARDED_BY(mu_);
  int64_t next_seq_ ABSL_GUARDED_BY(mu_) = 1;
  int64_t seq_ ABSL_GUARDED_BY(mu_) = 0;  // the latest update's
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  std::shared_ptr<const PlanUpdate> snap_committed_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const PlanUpdate> snap_abandoned_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const PlanUpdate> snap_pending_ ABSL_GUARDED_BY(mu_);
  // The last ABANDONED update published (staged).
  std::shared_ptr<const PlanUpdate> published_abandoned_ ABSL_GUARDED_BY(mu_);
};

}  // namespace zshard::server
