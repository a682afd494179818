// The plan update log, its snapshot and its waiters.
#include "server/membership/plan_update_log.h"

#include <algorithm>
#include <utility>

namespace zshard::server {

void PlanUpdateLog::Publish(PlanPhase phase, const EpochPlan& plan,
                            const EpochTransition& now) {
  {
    absl::MutexLock lock(&mu_);
    auto update = std::make_shared<const PlanUpdate>(
        PlanUpdate{next_seq_++, phase, plan});
    log_.push_back(update);
    while (static_cast<int>(log_.size()) > std::max(1, capacity_)) {
      log_.pop_front();
    }
    seq_ = update->seq;
  }
  Snapshot(now);
  absl::MutexLock lock(&mu_);
  cv_.SignalAll();
}

void PlanUpdateLog::Snapshot(const EpochTransition& now) {
  int64_t seq = 0;
  {
    absl::MutexLock lock(&mu_);
    seq = next_seq_ - 1;
  }
  // Copied outside the lock: a plan may carry many moves.
  std::shared_ptr<const PlanUpdate> committed, pending;
  if (now.committed().epoch > 0) {
    // A new watcher sees the committed epoch's moves until it is stable.
    committed = std::make_shared<const PlanUpdate>(PlanUpdate{
        seq,
        now.committed_stable() ? PlanPhase::kStable : PlanPhase::kCommitted,
        now.committed()});
  }
  if (now.proposal() != nullptr) {
    pending = std::make_shared<const PlanUpdate>(
        PlanUpdate{seq, PlanPhase::kProposed, *now.proposal()});
  } else if (now.abandoned() != nullptr) {
    pending = std::make_shared<const PlanUpdate>(
        PlanUpdate{seq, PlanPhase::kAbandoned, *now.abandoned()});
  }
  absl::MutexLock lock(&mu_);
  snap_committed_ = std::move(committed);
  snap_pending_ = std::move(pending);
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
  if (snap_pending_) batch.updates.push_back(snap_pending_);
  return batch;
}

void PlanUpdateLog::Shutdown() {
  absl::MutexLock lock(&mu_);
  shutdown_ = true;
  cv_.SignalAll();
}

}  // namespace zshard::server
