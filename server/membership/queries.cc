// Membership: what the service adapters read (the cluster view, plans,
// checkpoints, history, stats), and the helpers that record a change
// through the publisher (events, epochs, meta).
#include <algorithm>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/membership/membership.h"

namespace zshard::server {

void Membership::PublishLocked(PlanPhase phase, const EpochPlan& plan) {
  publisher_.Publish(phase, plan, transition_);
}

WatchBatch Membership::WaitForUpdates(int64_t after_seq,
                                      absl::Duration timeout) {
  return publisher_.Wait(after_seq, timeout);
}

void Membership::Shutdown() {
  absl::MutexLock lock(&mu_);
  publisher_.Shutdown();
}

ClusterView Membership::View() {
  absl::MutexLock lock(&mu_);
  const EpochPlan& committed = transition_.committed();
  ClusterView v;
  v.job = spec_.name;
  v.epoch = committed.epoch;
  v.transitioning = transition_.phase() != TransitionPhase::kStable;
  v.pending_epoch = transition_.pending_epoch();
  v.world = committed.world;
  v.instances =
      committed.epoch > 0 ? committed.instances : spec_.world.instances;
  v.plan_hash = committed.plan_hash;
  v.min_world = spec_.world.min;
  v.max_world = spec_.world.max;
  v.target_world = world_.target();
  int64_t now = clock_->NowMs();
  v.isolated = members_.isolation().isolated();
  if (v.isolated) v.isolated_ms = now - members_.isolation().since_ms();
  int d = committed.world > 0 ? committed.world / committed.instances : 1;
  for (const auto& [id, m] : members_.all()) {
    MemberView mv;
    mv.member = MemberTable::Copy(m);
    mv.suspect = IsLive(m.state) && m.lease->suspect_since_ms.load() >= 0;
    if (const Quarantine* q = health_.links.QuarantineOf(m.worker_id, now);
        q != nullptr && IsLive(m.state)) {
      mv.quarantine =
          absl::StrCat("apart from ", q->peer_name, " for ",
                       (q->until_ms - now + 999) / 1000, " s: ", q->reason);
    }
    mv.member.token.clear();
    mv.member.lease = nullptr;
    if (m.rank >= 0 && m.rank < static_cast<int>(committed.slots.size()) &&
        committed.slots[static_cast<size_t>(m.rank)].worker_id == m.worker_id) {
      // The epoch's own (inside the slot's data-parallel domain in a
      // model-parallel job).
      mv.instance = committed.slots[static_cast<size_t>(m.rank)].instance;
      mv.shard_rank = committed.slots[static_cast<size_t>(m.rank)].shard_rank;
    } else if (m.rank >= 0) {
      mv.instance = m.rank / d;
      mv.shard_rank = m.rank % d;
    }
    mv.ms_since_heartbeat = std::max<int64_t>(0, members_.SilenceMs(m, now));
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
  return transition_.committed().epoch;
}

EpochPlan Membership::CommittedPlan() {
  absl::MutexLock lock(&mu_);
  return transition_.committed();
}

EpochPlan Membership::StablePlan() {
  absl::MutexLock lock(&mu_);
  return transition_.stable();
}

std::vector<CheckpointRecord> Membership::Checkpoints() {
  absl::MutexLock lock(&mu_);
  return checkpoints_.committed();
}

std::vector<CheckpointAttempt> Membership::IncompleteCheckpoints() {
  absl::MutexLock lock(&mu_);
  return checkpoints_.Incomplete();
}

std::vector<ReshardRecord> Membership::ReshardHistory(int limit) {
  absl::MutexLock lock(&mu_);
  return history_.Latest(limit);
}

std::string Membership::FailureReason() {
  absl::MutexLock lock(&mu_);
  return job_.failure_reason();
}

int64_t Membership::HeardFromNoneMs() {
  absl::MutexLock lock(&mu_);
  if (!members_.isolation().isolated()) return 0;
  const int64_t now = clock_->NowMs();
  int64_t quiet = -1;
  for (const auto& [id, m] : members_.all()) {
    if (!IsLive(m.state)) continue;
    const int64_t silent = members_.SilenceMs(m, now);
    quiet = quiet < 0 ? silent : std::min(quiet, silent);
  }
  return std::max<int64_t>(0, quiet);
}

MembershipStats Membership::Stats() {
  absl::MutexLock lock(&mu_);
  MembershipStats s;
  s.isolated = members_.isolation().isolated();
  const TransitionCounts& t = transition_.counts();
  s.commits = t.commits;
  s.abandons = t.abandons;
  s.proposals = t.proposals;
  s.reshards = t.reshards;
  s.reshard_bytes = t.reshard_bytes;
  s.last_reshard_seconds = t.last_reshard_seconds;
  s.superseded = health_.superseded;
  s.failure_detection = health_.detection;
  s.link_failures = health_.links.failures();
  s.exclusions = health_.links.exclusions();
  s.transition_timeouts = health_.timeouts;
  s.prepare_failures = health_.prepare_failures;
  s.epoch = transition_.committed().epoch;
  s.checkpoints = checkpoints_.count();
  s.last_checkpoint_step = checkpoints_.last_step();
  s.last_checkpoint_ms = checkpoints_.last_ms();
  s.checkpoint_failures = checkpoints_.failures();
  for (const auto& [id, m] : members_.all()) ++s.members_by_state[m.state];
  const StoreWriter::Stats w = publisher_.writer_stats();
  s.store_changes = w.changes;
  s.store_transactions = w.transactions;
  s.store_failures = w.failures;
  s.store_seconds = w.seconds;
  return s;
}

void Membership::EventLocked(const std::string& kind,
                             const std::string& reason) {
  publisher_.RecordEvent(kind, reason, transition_.committed().epoch);
}

void Membership::RecordEpochLocked(const EpochPlan& plan, EpochStatus status,
                                   bool moves_unchanged,
                                   const std::string& outcome) {
  publisher_.batch().SaveEpoch(plan, status, moves_unchanged);
  history_.Record(plan, outcome);
}

void Membership::SaveMetaLocked() {
  publisher_.batch().SetMeta("next_epoch", transition_.next_epoch());
  publisher_.batch().SetMeta("next_join_seq", members_.next_join_seq());
  publisher_.batch().SetMeta("target_world", world_.target());
  publisher_.batch().SetMeta("finished", job_.finished() ? 1 : 0);
  publisher_.batch().SetMeta("failed", job_.failed() ? 1 : 0);
  publisher_.batch().SetMeta("restore_next",
                             checkpoints_.restore_next() ? 1 : 0);
}

void Membership::FlushLocked() { publisher_.Flush(members_, transition_); }

}  // namespace zshard::server
