// The plan update log, its snapshot and its waiters.
#include "server/membership/publish/plan_update_log.h"

#include <algorithm>
#include <utility>

namespace zshard::server {

namespace {

// `phase` of `plan` numbered `seq`: `latest` itself when it is that very
// update (shared, so that a watcher's bytes are encoded once), else a copy.
std::shared_ptr<const PlanUpdate> UpdateOf(
    int64_t seq, PlanPhase phase, const EpochPlan& plan,
    const std::shared_ptr<const PlanUpdate>& latest) {
  if (latest != nullptr && latest->phase == phase &&
      latest->plan.epoch == plan.epoch) {
    return latest;
  }
  return std::make_shared<const PlanUpdate>(PlanUpdate{seq, phase, plan});
}

}  // namespace

PlanUpdateLog::Snapshots PlanUpdateLog::MakeSnapshots(
    int64_t seq, const EpochTransition& now,
    const std::shared_ptr<const PlanUpdate>& latest,
    const std::shared_ptr<const PlanUpdate>& abandoned) {
  Snapshots out;
  if (now.committed().epoch > 0) {
    // A new watcher sees the committed epoch's moves until it is stable.
    out.committed = UpdateOf(
        seq,
        now.committed_stable() ? PlanPhase::kStable : PlanPhase::kCommitted,
        now.committed(), latest);
  }
  if (now.proposal() != nullptr) {
    if (abandoned != nullptr && abandoned->plan.epoch > now.committed().epoch &&
        abandoned->plan.epoch < now.proposal()->epoch) {
      out.abandoned = abandoned;
    }
    out.pending = UpdateOf(seq, PlanPhase::kProposed, *now.proposal(), latest);
  } else if (now.abandoned() != nullptr) {
    out.pending =
        UpdateOf(seq, PlanPhase::kAbandoned, *now.abandoned(), latest);
  }
  return out;
}

void PlanUpdateLog::Publish(PlanPhase phase, const EpochPlan& plan,
                            const EpochTransition& now) {
  int64_t seq = 0;
  std::shared_ptr<const PlanUpdate> abandoned;
  {
    absl::MutexLock lock(&mu_);
    seq = next_seq_;
    abandoned = published_abandoned_;
  }
  // Copied outside the lock: a plan may carry many moves. Only Publish
  // and Snapshot change next_seq_ and published_abandoned_, and they never
  // run concurrently.
  auto update =
      std::make_shared<const PlanUpdate>(PlanUpdate{seq, phase, plan});
  if (phase == PlanPhase::kAbandoned) abandoned = update;
  Snapshots snap = MakeSnapshots(seq, now, update, abandoned);
  absl::MutexLock lock(&mu_);
  next_seq_ = seq + 1;
  published_abandoned_ = std::move(abandoned);
  gate_.Stage(Staged{std::move(update), std::move(snap)});
}

void PlanUpdateLog::Snapshot(const EpochTransition& now) {
  int64_t seq = 0;
  std::shared_ptr<const PlanUpdate> abandoned;
  {
    absl::MutexLock lock(&mu_);
    seq = next_seq_ - 1;
    abandoned = published_abandoned_;
  }
  Snapshots snap = MakeSnapshots(seq, now, nullptr, abandoned);
  absl::MutexLock lock(&mu_);
  gate_.Stage(Staged{nullptr, std::move(snap)});
}

void PlanUpdateLog::Seal(int64_t ticket) {
  absl::MutexLock lock(&mu_);
  ShowLocked(gate_.Seal(ticket));
}

void PlanUpdateLog::Release(int64_t durable) {
  absl::MutexLock lock(&mu_);
  ShowLocked(gate_.Release(durable));
}

void PlanUpdateLog::ShowLocked(std::vector<Staged> shown) {
  if (shown.empty()) return;
  for (Staged& s : shown) {
    // An update and the snapshot that includes it appear together: a
    // watcher told that seq is the latest never gets an older snapshot.
    if (s.update != nullptr) {
      seq_ = s.update->seq;
      log_.push_back(std::move(s.update));
      while (static_cast<int>(log_.size()) > std::max(1, capacity_)) {
        log_.pop_front();
      }
    }
    snap_committed_ = std::move(s.snap.committed);
    snap_abandoned_ = std::move(s.snap.abandoned);
    snap_pending_ = std::move(s.snap.pending);
  }
  cv_.SignalAll();
}

WatchBatch PlanUpdateLog::Wait(int64_t after_seq, absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  absl::MutexLock lock(&mu_);
  while (after_seq >= 0 && !shutdown_ && seq_ <= after_seq) {
    if (cv_.WaitWithDeadline(&mu_, deadline)) break;
  }
  WatchBatch batch;
  batch.shutdown = shutdown_;
  batch.last_seq = seq_;
  bool behind =
      after_seq < 0 || (!log_.empty() && log_.front()->seq > after_seq + 1);
  if (!behind) {
    for (const auto& u : log_) {
      if (u->seq > after_seq) batch.updates.push_back(u);
    }
    return batch;
  }
  if (snap_committed_) batch.updates.push_back(snap_committed_);
  if (snap_abandoned_) batch.updates.push_back(snap_abandoned_);
  if (snap_pending_) batch.updates.push_back(snap_pending_);
  return batch;
}

void PlanUpdateLog::Shutdown() {
  absl::MutexLock lock(&mu_);
  shutdown_ = true;
  cv_.SignalAll();
}

}  // namespace zshard::server
