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
    // A new watcher sees the committed epoch's moves until it is stable.
    committed = std::make_shared<const PlanUpdate>(PlanUpdate{
        seq, committed_stable_ ? PlanPhase::kStable : PlanPhase::kCommitted,
        committed_});
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

EpochPlan Membership::StablePlan() {
  absl::MutexLock lock(&mu_);
  return stable_;
}

std::vector<CheckpointRecord> Membership::Checkpoints() {
  absl::MutexLock lock(&mu_);
  return checkpoints_.committed();
}

std::vector<ReshardRecord> Membership::ReshardHistory(int limit) {
  absl::MutexLock lock(&mu_);
  size_t n = history_.size();
  size_t first = limit > 0 && static_cast<size_t>(limit) < n ? n - limit : 0;
  return std::vector<ReshardRecord>(history_.begin() + first, history_.end());
}

std::string Membership::FailureReason() {
  absl::MutexLock lock(&mu_);
  return failed_ ? failure_reason_ : std::string();
}

void Membership::HistoryLocked(const EpochPlan& p, const std::string& outcome) {
  ReshardRecord r;
  r.epoch = p.epoch;
  r.base_epoch = p.base_epoch;
  r.reason = p.reason;
  r.world_before = p.world_before;
  r.world_after = p.world;
  r.instances = p.instances;
  r.moves = p.summary.moves;
  r.bytes_moved = p.summary.bytes_moved;
  r.lower_bound_bytes = p.summary.lower_bound_bytes;
  r.bytes_from_checkpoint = p.summary.bytes_from_checkpoint;
  r.bytes_same_node = p.summary.bytes_same_node;
  r.restored_step = p.restore.active() ? p.restore.step : -1;
  r.proposed_ms = p.proposed_ms;
  r.duration_ms = p.duration_ms;
  r.outcome = outcome;
  // Newest last; an epoch's line is updated in place.
  for (auto it = history_.rbegin(); it != history_.rend(); ++it) {
    if (it->epoch == p.epoch) {
      *it = std::move(r);
      return;
    }
    if (it->epoch < p.epoch) break;
  }
  history_.push_back(std::move(r));
  while (static_cast<int>(history_.size()) >
         std::max(1, options_.history_size)) {
    history_.pop_front();
  }
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

void Membership::SaveEpochLocked(const EpochPlan& plan, EpochStatus status,
                                 bool moves_unchanged) {
  if (store_ == nullptr) return;
  for (StoredEpoch& e : pending_write_.epochs) {
    if (e.plan.epoch == plan.epoch) {
      // Moves not yet written stay in the batch.
      e = StoredEpoch{plan, status, moves_unchanged && e.moves_unchanged};
      return;
    }
  }
  StoredEpoch e{plan, status, moves_unchanged};
  // Moves already stored are not copied again.
  if (moves_unchanged) e.plan.moves.clear();
  pending_write_.epochs.push_back(std::move(e));
}

void Membership::SaveMetaLocked() {
  if (store_ == nullptr) return;
  pending_write_.meta["next_epoch"] = next_epoch_;
  pending_write_.meta["next_join_seq"] = next_join_seq_;
  pending_write_.meta["target_world"] = target_world_;
  pending_write_.meta["finished"] = finished_ ? 1 : 0;
  pending_write_.meta["failed"] = failed_ ? 1 : 0;
  pending_write_.meta["restore_next"] = restore_next_ ? 1 : 0;
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
