// Membership: read-only views, the plan update stream, and the helpers
// that record a change (events, store batch, history, updates).
#include <algorithm>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/logging.h"
#include "server/membership/membership.h"

namespace zshard::server {

void Membership::PublishLocked(PlanPhase phase, const EpochPlan& plan) {
  // A proposal replaces an abandonment of its change; anything else comes
  // after it.
  if (phase == PlanPhase::kProposed) {
    unpublished_abandon_.reset();
  } else {
    PublishAbandonLocked();
  }
  if (phase == PlanPhase::kAbandoned) {
    unpublished_abandon_ = plan;  // at the change's end, unless replaced
    return;
  }
  PublishFactsLocked();  // an update's epoch is one heartbeats accept
  updates_.Publish(phase, plan, transition_);
}

void Membership::PublishAbandonLocked() {
  std::optional<EpochPlan> plan =
      std::exchange(unpublished_abandon_, std::nullopt);
  if (!plan.has_value()) return;
  PublishFactsLocked();
  updates_.Publish(PlanPhase::kAbandoned, *plan, transition_);
}

WatchBatch Membership::WaitForUpdates(int64_t after_seq,
                                      absl::Duration timeout) {
  return updates_.Wait(after_seq, timeout);
}

void Membership::Shutdown() {
  absl::MutexLock lock(&mu_);
  events_.Shutdown();
  updates_.Shutdown();
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
  v.target_world = target_world_;
  int64_t now = clock_->NowMs();
  int d = committed.world > 0 ? committed.world / committed.instances : 1;
  for (const auto& [id, m] : members_.all()) {
    MemberView mv;
    mv.member = MemberTable::Copy(m);
    mv.member.token.clear();
    mv.member.lease = nullptr;
    if (m.rank >= 0) {
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
  return failed_ ? failure_reason_ : std::string();
}

MembershipStats Membership::Stats() {
  absl::MutexLock lock(&mu_);
  MembershipStats s = stats_;
  s.epoch = transition_.committed().epoch;
  s.checkpoints = checkpoints_.count();
  s.last_checkpoint_step = checkpoints_.last_step();
  s.last_checkpoint_ms = checkpoints_.last_ms();
  s.checkpoint_failures = checkpoints_.failures();
  for (const auto& [id, m] : members_.all()) ++s.members_by_state[m.state];
  const StoreWriter::Stats w = writer_.stats();
  s.store_changes = w.changes;
  s.store_transactions = w.transactions;
  s.store_failures = w.failures;
  s.store_seconds = w.seconds;
  return s;
}

void Membership::EventLocked(const std::string& kind,
                             const std::string& reason) {
  const int64_t epoch = transition_.committed().epoch;
  Event e{WallTimeMs(), epoch, kind, reason};
  e.seq = ++last_event_seq_;
  ZSHARD_LOG_INFO(absl::StrCat(kind, ": ", reason),
                  {{"epoch", absl::StrCat(epoch)}});
  batch_.AddEvent(e);
  absl::MutexLock lock(&shown_mu_);
  event_gate_.Stage(std::move(e));
}

void Membership::RecordEpochLocked(const EpochPlan& plan, EpochStatus status,
                                   bool moves_unchanged,
                                   const std::string& outcome) {
  batch_.SaveEpoch(plan, status, moves_unchanged);
  history_.Record(plan, outcome);
}

void Membership::SaveMetaLocked() {
  batch_.SetMeta("next_epoch", transition_.next_epoch());
  batch_.SetMeta("next_join_seq", members_.next_join_seq());
  batch_.SetMeta("target_world", target_world_);
  batch_.SetMeta("finished", finished_ ? 1 : 0);
  batch_.SetMeta("failed", failed_ ? 1 : 0);
  batch_.SetMeta("restore_next", checkpoints_.restore_next() ? 1 : 0);
}

void Membership::FlushLocked() {
  PublishAbandonLocked();
  PublishFactsLocked();
  const int64_t ticket = writer_.Enqueue(batch_.Take(members_));
  if (ticket > 0) last_ticket_ = ticket;
  PassGates(GateStep::kSeal, last_ticket_);
}

void Membership::OnDurable(int64_t durable) {
  PassGates(GateStep::kRelease, durable);
}

void Membership::PassGates(GateStep step, int64_t ticket) {
  const bool seal = step == GateStep::kSeal;
  {
    absl::MutexLock lock(&shown_mu_);
    std::vector<HeartbeatFacts> facts =
        seal ? facts_gate_.Seal(ticket) : facts_gate_.Release(ticket);
    std::vector<Event> events =
        seal ? event_gate_.Seal(ticket) : event_gate_.Release(ticket);
    ShowLocked(std::move(facts), std::move(events));
  }
  if (seal) {
    updates_.Seal(ticket);
  } else {
    updates_.Release(ticket);
  }
}

void Membership::ShowLocked(std::vector<HeartbeatFacts> facts,
                            std::vector<Event> events) {
  if (!facts.empty()) {
    std::atomic_store(
        &facts_,
        std::shared_ptr<const HeartbeatFacts>(
            std::make_shared<HeartbeatFacts>(std::move(facts.back()))));
  }
  for (Event& e : events) events_.Append(std::move(e));
}

}  // namespace zshard::server
