// Membership: the plan update log and its waiters, read-only views, and
// the batch of writes handed to the store at the end of each change.
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/logging.h"
#include "server/membership/membership.h"

namespace zshard::server {

void Membership::PublishLocked(PlanPhase phase, const EpochPlan& plan) {
  auto update =
      std::make_shared<const PlanUpdate>(PlanUpdate{next_seq_++, phase, plan});
  {
    absl::MutexLock lock(&watch_mu_);
    log_.push_back(update);
    while (static_cast<int>(log_.size()) >
           std::max(1, options_.update_log_size)) {
      log_.pop_front();
    }
    watch_seq_ = update->seq;
  }
  SnapshotLocked();
  absl::MutexLock lock(&watch_mu_);
  watch_cv_.SignalAll();
}

void Membership::SnapshotLocked() {
  std::shared_ptr<const PlanUpdate> committed, pending;
  int64_t seq = next_seq_ - 1;
  if (committed_.epoch > 0) {
    committed = std::make_shared<const PlanUpdate>(
        PlanUpdate{seq, PlanPhase::kCommitted, committed_});
  }
  if (proposal_) {
    pending = std::make_shared<const PlanUpdate>(
        PlanUpdate{seq, PlanPhase::kProposed, *proposal_});
  } else if (abandoned_) {
    pending = std::make_shared<const PlanUpdate>(
        PlanUpdate{seq, PlanPhase::kAbandoned, *abandoned_});
  }
  absl::MutexLock lock(&watch_mu_);
  snap_committed_ = std::move(committed);
  snap_pending_ = std::move(pending);
}

WatchBatch Membership::WaitForUpdates(int64_t after_seq,
                                      absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  absl::MutexLock lock(&watch_mu_);
  while (after_seq >= 0 && !watch_shutdown_ && watch_seq_ <= after_seq) {
    if (watch_cv_.WaitWithDeadline(&watch_mu_, deadline)) break;
  }
  WatchBatch batch;
  batch.shutdown = watch_shutdown_;
  batch.last_seq = watch_seq_;
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

void Membership::Shutdown() {
  absl::MutexLock lock(&mu_);
  shutdown_ = true;
  events_.Shutdown();
  absl::MutexLock watch_lock(&watch_mu_);
  watch_shutdown_ = true;
  watch_cv_.SignalAll();
}

ClusterView Membership::View() {
  absl::MutexLock lock(&mu_);
  ClusterView v;
  v.job = spec_.name;
  v.epoch = committed_.epoch;
  v.transitioning =
      proposal_.has_value() || (committed_.epoch > 0 && !committed_stable_);
  v.pending_epoch =
      proposal_ ? proposal_->epoch : (committed_stable_ ? 0 : committed_.epoch);
  v.world = committed_.world;
  v.instances = spec_.world.instances;
  v.plan_hash = committed_.plan_hash;
  v.min_world = spec_.world.min;
  v.max_world = spec_.world.max;
  v.target_world = target_world_;
  int64_t now = clock_->NowMs();
  int d = committed_.world > 0 ? committed_.world / committed_.instances : 1;
  for (const auto& [id, m] : members_) {
    MemberView mv;
    mv.member = m;
    mv.member.token.clear();
    if (m.rank >= 0) {
      mv.instance = m.rank / d;
      mv.shard_rank = m.rank % d;
    }
    mv.ms_since_heartbeat = std::max<int64_t>(0, now - m.last_heartbeat_ms);
    v.members.push_back(std::move(mv));
  }
  auto key = [](const MemberView& mv) {
    const Member& m = mv.member;
    return std::make_tuple(!IsLive(m.state), m.rank < 0, m.rank, m.join_seq);
  };
  std::sort(v.members.begin(), v.members.end(),
            [&](const MemberView& a, const MemberView& b) {
              return key(a) < key(b);
            });
  return v;
}

int64_t Membership::CommittedEpoch() {
  absl::MutexLock lock(&mu_);
  return committed_.epoch;
}

EpochPlan Membership::CommittedPlan() {
  absl::MutexLock lock(&mu_);
  return committed_;
}

MembershipStats Membership::Stats() {
  absl::MutexLock lock(&mu_);
  MembershipStats s = stats_;
  for (const auto& [id, m] : members_) ++s.members_by_state[m.state];
  return s;
}

void Membership::EventLocked(const std::string& kind,
                             const std::string& reason) {
  Event e{WallTimeMs(), committed_.epoch, kind, reason};
  e.seq = events_.Append(e);
  ZSHARD_LOG_INFO(absl::StrCat(kind, ": ", reason),
                  {{"epoch", absl::StrCat(committed_.epoch)}});
  if (store_ != nullptr) pending_write_.events.push_back(std::move(e));
}

void Membership::DirtyLocked(const Member& m) {
  if (store_ != nullptr) dirty_.insert(m.worker_id);
}

void Membership::SaveEpochLocked(const EpochPlan& plan, EpochStatus status) {
  if (store_ == nullptr) return;
  for (StoredEpoch& e : pending_write_.epochs) {
    if (e.plan.epoch == plan.epoch) {
      e = StoredEpoch{plan, status};
      return;
    }
  }
  pending_write_.epochs.push_back(StoredEpoch{plan, status});
}

void Membership::SaveMetaLocked() {
  if (store_ == nullptr) return;
  pending_write_.meta["next_epoch"] = next_epoch_;
  pending_write_.meta["next_join_seq"] = next_join_seq_;
  pending_write_.meta["target_world"] = target_world_;
  pending_write_.meta["finished"] = finished_ ? 1 : 0;
}

void Membership::FlushLocked() {
  if (store_ == nullptr) return;
  for (const std::string& id : dirty_) {
    auto it = members_.find(id);
    if (it != members_.end()) pending_write_.members.push_back(it->second);
  }
  dirty_.clear();
  if (pending_write_.empty()) return;
  absl::Status s = store_->Apply(pending_write_);
  if (!s.ok()) {
    ZSHARD_LOG_ERROR(absl::StrCat("state store write failed: ", s.message()));
  }
  pending_write_ = StoreWrite();
}

}  // namespace zshard::server
