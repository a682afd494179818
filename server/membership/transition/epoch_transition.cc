// The epoch transition's records and steps.
#include "server/membership/transition/epoch_transition.h"

#include <algorithm>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace zshard::server {
namespace {

std::set<std::string> SendersOf(const EpochPlan& plan) {
  std::set<std::string> senders;
  for (const plan::Move& mv : plan.moves) {
    if (!mv.source_member.empty()) senders.insert(mv.source_member);
  }
  return senders;
}

std::unordered_map<std::string, int> RanksOf(const EpochPlan& plan) {
  std::unordered_map<std::string, int> ranks;
  for (int r = 0; r < plan.world && r < static_cast<int>(plan.slots.size());
       ++r) {
    ranks.emplace(plan.slots[r].worker_id, r);
  }
  return ranks;
}

int Lookup(const std::unordered_map<std::string, int>& ranks,
           const std::string& worker_id) {
  auto it = ranks.find(worker_id);
  return it == ranks.end() ? -1 : it->second;
}

}  // namespace

int EpochTransition::RankInProposal(const std::string& worker_id) const {
  return proposal_ ? Lookup(proposal_ranks_, worker_id) : -1;
}
int EpochTransition::RankInCommitted(const std::string& worker_id) const {
  return Lookup(committed_ranks_, worker_id);
}
int EpochTransition::RankInStable(const std::string& worker_id) const {
  return Lookup(stable_ranks_, worker_id);
}

absl::Status EpochTransition::Step(TransitionEvent event) {
  std::optional<TransitionPhase> next = NextPhase(phase_, event);
  if (!next.has_value()) {
    return absl::InternalError(absl::StrCat("transition: no ",
                                            TransitionEventName(event), " in ",
                                            TransitionPhaseName(phase_)));
  }
  phase_ = *next;
  switch (event) {
    case TransitionEvent::kPropose:
      ++counts_.proposals;
      break;
    case TransitionEvent::kAbandon:
      ++counts_.abandons;
      break;
    case TransitionEvent::kCommit:
      ++counts_.commits;
      break;
    case TransitionEvent::kStable:
      break;
  }
  return absl::OkStatus();
}

void EpochTransition::Restore(EpochPlan committed, bool committed_stable,
                              EpochPlan stable, int64_t next_epoch) {
  committed_ = std::move(committed);
  stable_ = std::move(stable);
  committed_ranks_ = RanksOf(committed_);
  stable_ranks_ = RanksOf(stable_);
  next_epoch_ = next_epoch;
  phase_ =
      committed_stable ? TransitionPhase::kStable : TransitionPhase::kCommitted;
  proposal_.reset();
  prepared_.clear();
  ranks_prepared_ = 0;
  active_acks_.clear();
  ranks_active_ = 0;
  committed_senders_.clear();
  if (!committed_stable) committed_senders_ = SendersOf(committed_);
}

absl::Status EpochTransition::Propose(EpochPlan plan) {
  if (plan.epoch != next_epoch_) {
    return absl::InternalError(absl::StrCat(
        "transition: proposed epoch ", plan.epoch, " is not ", next_epoch_));
  }
  if (absl::Status s = Step(TransitionEvent::kPropose); !s.ok()) return s;
  ++next_epoch_;
  proposal_ = std::move(plan);
  proposal_ranks_ = RanksOf(*proposal_);
  prepared_.clear();
  ranks_prepared_ = 0;
  abandoned_.reset();
  return absl::OkStatus();
}

absl::StatusOr<EpochPlan> EpochTransition::Abandon(const std::string& why) {
  if (absl::Status s = Step(TransitionEvent::kAbandon); !s.ok()) return s;
  EpochPlan p = *std::move(proposal_);
  p.reason = why;
  proposal_.reset();
  prepared_.clear();
  ranks_prepared_ = 0;
  abandoned_ = p;
  return p;
}

bool EpochTransition::AckPrepared(
    const std::string& worker_id, const PreparedAck& ack,
    const std::function<bool(const std::string&)>& live) {
  if (!proposal_) return false;
  auto [it, fresh] = prepared_.insert_or_assign(worker_id, ack);
  (void)it;
  if (fresh && RankInProposal(worker_id) >= 0) ++ranks_prepared_;
  // Counted, so that N acks cost O(N) and not O(N x world).
  if (ranks_prepared_ < proposal_->world) return false;
  for (int r = 0; r < stable_.world; ++r) {
    const std::string& id = stable_.slots[r].worker_id;
    if (live(id) && prepared_.count(id) == 0) return false;
  }
  return true;
}

absl::StatusOr<EpochPlan> EpochTransition::ResolveCommit(
    bool holds_state) const {
  if (!proposal_) return absl::InternalError("transition: no proposal");
  EpochPlan p = *proposal_;
  // Carried from epoch to epoch until the steps it names have run again.
  p.repeat_through = stable_.repeat_through;
  if (p.restore.active()) {
    p.resume_step = p.restore.step;
    p.resume_adam_step = p.restore.adam_step;
    // The members that prepared stopped at the highest step the world
    // reached (those that did not are dead, and were at most as far).
    for (const auto& [id, ack] : prepared_) {
      p.repeat_through = std::max(p.repeat_through, ack.step);
    }
    if (p.repeat_through <= p.resume_step) p.repeat_through = 0;
    return p;
  }
  // The idle workload holds no optimizer state and steps without
  // collectives, so its members stop at different steps: none is a
  // holder, and the highest step is the resume step.
  std::vector<PreparedAck> holders, others;
  for (const auto& [id, ack] : prepared_) {
    (holds_state && RankInStable(id) >= 0 ? holders : others).push_back(ack);
  }
  absl::StatusOr<CommitPoint> point = ResolveCommitPoint(holders, others);
  if (!point.ok()) return point.status();
  p.resume_step = point->resume_step;
  p.resume_adam_step = point->resume_adam_step;
  p.finish_pending_step = point->finish_pending_step;
  p.commit_values = point->commit_values;
  return p;
}

absl::Status EpochTransition::Commit(EpochPlan plan) {
  if (absl::Status s = Step(TransitionEvent::kCommit); !s.ok()) return s;
  committed_ = std::move(plan);
  committed_ranks_ = RanksOf(committed_);
  committed_senders_ = SendersOf(committed_);
  active_acks_.clear();
  ranks_active_ = 0;
  proposal_.reset();
  prepared_.clear();
  ranks_prepared_ = 0;
  return absl::OkStatus();
}

bool EpochTransition::AckActive(const std::string& worker_id) {
  if (active_acks_.insert(worker_id).second &&
      RankInCommitted(worker_id) >= 0) {
    ++ranks_active_;
  }
  return ranks_active_ >= committed_.world;
}

absl::Status EpochTransition::MarkStable(int64_t duration_ms) {
  if (absl::Status s = Step(TransitionEvent::kStable); !s.ok()) return s;
  committed_.duration_ms = duration_ms;
  if (!committed_.moves.empty()) {
    ++counts_.reshards;
    counts_.reshard_bytes += committed_.summary.bytes_moved;
    counts_.last_reshard_seconds = static_cast<double>(duration_ms) / 1000.0;
  }
  stable_ = committed_;
  stable_ranks_ = committed_ranks_;
  committed_senders_.clear();
  return absl::OkStatus();
}

absl::Status EpochTransition::CheckEpoch(int64_t epoch) const {
  if (epoch > 0 &&
      (epoch == committed_.epoch || (proposal_ && proposal_->epoch == epoch))) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "epoch ", epoch, " is stale (committed ", committed_.epoch,
      proposal_ ? absl::StrCat(", proposed ", proposal_->epoch) : "", ")"));
}

int64_t EpochTransition::pending_epoch() const {
  if (proposal_) return proposal_->epoch;
  return committed_stable() ? 0 : committed_.epoch;
}

}  // namespace zshard::server
