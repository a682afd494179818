// The epoch transition's records and steps.
#include "server/membership/epoch_transition.h"

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

}  // namespace

absl::Status EpochTransition::Step(TransitionEvent event) {
  std::optional<TransitionPhase> next = NextPhase(phase_, event);
  if (!next.has_value()) {
    return absl::InternalError(absl::StrCat("transition: no ",
                                            TransitionEventName(event), " in ",
                                            TransitionPhaseName(phase_)));
  }
  phase_ = *next;
  return absl::OkStatus();
}

void EpochTransition::Restore(EpochPlan committed, bool committed_stable,
                              EpochPlan stable, int64_t next_epoch) {
  committed_ = std::move(committed);
  stable_ = std::move(stable);
  next_epoch_ = next_epoch;
  phase_ =
      committed_stable ? TransitionPhase::kStable : TransitionPhase::kCommitted;
  proposal_.reset();
  prepared_.clear();
  active_acks_.clear();
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
  prepared_.clear();
  abandoned_.reset();
  return absl::OkStatus();
}

absl::StatusOr<EpochPlan> EpochTransition::Abandon(const std::string& why) {
  if (absl::Status s = Step(TransitionEvent::kAbandon); !s.ok()) return s;
  EpochPlan p = *std::move(proposal_);
  p.reason = why;
  proposal_.reset();
  prepared_.clear();
  abandoned_ = p;
  return p;
}

bool EpochTransition::AckPrepared(
    const std::string& worker_id, const PreparedAck& ack,
    const std::function<bool(const std::string&)>& live) {
  if (!proposal_) return false;
  prepared_[worker_id] = ack;
  for (int r = 0; r < proposal_->world; ++r) {
    if (prepared_.count(proposal_->slots[r].worker_id) == 0) return false;
  }
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
  if (p.restore.active()) {
    p.resume_step = p.restore.step;
    p.resume_adam_step = p.restore.adam_step;
    return p;
  }
  // The idle workload holds no optimizer state and steps without
  // collectives, so its members stop at different steps: none is a
  // holder, and the highest step is the resume step.
  std::vector<PreparedAck> holders, others;
  for (const auto& [id, ack] : prepared_) {
    (holds_state && RankIn(stable_, id) >= 0 ? holders : others).push_back(ack);
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
  committed_senders_ = SendersOf(committed_);
  active_acks_.clear();
  proposal_.reset();
  prepared_.clear();
  return absl::OkStatus();
}

bool EpochTransition::AckActive(const std::string& worker_id) {
  active_acks_.insert(worker_id);
  for (int r = 0; r < committed_.world; ++r) {
    if (active_acks_.count(committed_.slots[r].worker_id) == 0) return false;
  }
  return true;
}

absl::Status EpochTransition::MarkStable(int64_t duration_ms) {
  if (absl::Status s = Step(TransitionEvent::kStable); !s.ok()) return s;
  committed_.duration_ms = duration_ms;
  stable_ = committed_;
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
