// Membership: the two-phase epoch transition (propose with moves, PREPARED
// acks from ranks and senders, commit with the resolved resume point,
// ACTIVE acks, stable, abandon).
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/plan/plan.h"
#include "common/status.h"
#include "server/membership/epoch_moves.h"
#include "server/membership/membership.h"
#include "server/membership/world_policy.h"

namespace zshard::server {

bool Membership::CommittedBrokenLocked() const {
  if (committed_.epoch == 0) return false;
  for (int r = 0; r < committed_.world; ++r) {
    auto it = members_.find(committed_.slots[r].worker_id);
    if (it == members_.end() || !IsLive(it->second.state)) return true;
  }
  // A sender that dies before the epoch is stable leaves its moves undone.
  if (!committed_stable_) {
    for (const std::string& id : committed_senders_) {
      auto it = members_.find(id);
      if (it == members_.end() || !IsLive(it->second.state)) return true;
    }
  }
  return false;
}

bool Membership::NeedsReplanLocked() const {
  if (committed_.epoch == 0) return false;
  for (int r = 0; r < committed_.world; ++r) {
    auto it = members_.find(committed_.slots[r].worker_id);
    if (it == members_.end() || !HealthyLocked(it->second)) return true;
  }
  return false;
}

const plan::Plan* Membership::PlanLocked(int world) {
  auto it = plans_.find(world);
  if (it != plans_.end()) return it->second.get();
  auto p = plan::MakePlan(spec_.model, job::JobPlanOptions(spec_, world));
  if (!p.ok()) {
    hash_cache_[world] = "";
    return nullptr;
  }
  hash_cache_[world] = p->hash;
  auto shared = std::make_shared<const plan::Plan>(*std::move(p));
  plans_[world] = shared;
  return shared.get();
}

std::string Membership::PlanHashLocked(int world) {
  auto it = hash_cache_.find(world);
  if (it != hash_cache_.end()) return it->second;
  const plan::Plan* p = PlanLocked(world);
  return p == nullptr ? "" : p->hash;
}

void Membership::ReconcileLocked() {
  committed_broken_ = CommittedBrokenLocked();
  if (proposal_ || finished_ || failed_) return;
  const bool replan = committed_broken_ || NeedsReplanLocked();
  int healthy = 0;
  for (const auto& [id, m] : members_) healthy += HealthyLocked(m) ? 1 : 0;
  int w = ChooseWorld(healthy, spec_.world, target_world_);
  // Worlds the plan cannot be made for (e.g. expert_parallel not dividing
  // D) are skipped downwards.
  while (w > 0 && PlanHashLocked(w).empty()) {
    w -= spec_.world.instances;
    if (w < spec_.world.min) w = 0;
  }
  if (committed_.epoch > 0 && !committed_broken_) {
    if (!committed_stable_) return;  // grow, shrink or drain once stable
    if (!replan && (w == committed_.world || w == 0)) {
      for (auto& [id, m] : members_) {
        if (m.state == MemberState::kJoining) {
          m.state = MemberState::kSpare;
          DirtyLocked(m);
        }
      }
      return;
    }
  }
  if (w == 0) {
    std::string why = absl::StrCat(
        healthy, " healthy members, world needs ", spec_.world.min, " (",
        ExplainWorld(0, healthy, spec_.world, target_world_), ")");
    if (why != last_unviable_) EventLocked("waiting", why);
    last_unviable_ = why;
    return;
  }
  last_unviable_.clear();
  ProposeLocked(w);
}

void Membership::ProposeLocked(int world) {
  std::vector<RankCandidate> candidates;
  std::vector<const Member*> healthy;
  for (const auto& [id, m] : members_) {
    if (!HealthyLocked(m)) continue;
    healthy.push_back(&m);
    // Ranks of the stable epoch: that is where the state is (before the
    // first stable epoch no one holds state: keep the committed ranks).
    int prev = stable_.epoch > 0 ? RankIn(stable_, id) : m.rank;
    candidates.push_back(
        {id, prev, m.state == MemberState::kSpare, m.join_seq});
  }
  std::vector<std::string> ranks = AssignRanks(world, std::move(candidates));
  EpochPlan p;
  p.epoch = next_epoch_;
  p.base_epoch = stable_.epoch;
  p.world = world;
  p.world_before = stable_.world;
  p.instances = spec_.world.instances;
  p.plan_hash = PlanHashLocked(world);
  p.reason = change_reason_;
  p.proposed_ms = WallTimeMs();
  int d = world / p.instances;
  auto slot_of = [](const Member& m, int rank, int d) {
    Slot s{m.worker_id, m.name, m.address, rank, -1, -1, m.labels};
    if (rank >= 0) {
      s.instance = rank / d;
      s.shard_rank = rank % d;
    }
    return s;
  };
  for (int r = 0; r < world; ++r) {
    p.slots.push_back(slot_of(members_.at(ranks[r]), r, d));
  }
  std::sort(healthy.begin(), healthy.end(),
            [](const Member* a, const Member* b) {
              return a->join_seq < b->join_seq;
            });
  for (const Member* m : healthy) {
    if (std::find(ranks.begin(), ranks.end(), m->worker_id) != ranks.end()) {
      continue;
    }
    ++p.spares;
    if (p.spares <= options_.max_listed_spares) {
      p.slots.push_back(slot_of(*m, -1, d));
    }
  }
  if (!PlanMovesLocked(p)) return;
  ++next_epoch_;
  proposal_ = p;
  prepared_.clear();
  abandoned_.reset();
  ++stats_.proposals;
  SaveEpochLocked(p, EpochStatus::kProposed);
  SaveMetaLocked();
  PublishLocked(PlanPhase::kProposed, p);
  HistoryLocked(p, "in progress");
  // Which ranks change hands, so a reader sees who replaces whom.
  std::string changes;
  int changed = 0;
  for (int r = 0; r < world; ++r) {
    const std::string before =
        r < stable_.world ? stable_.slots[r].name : std::string();
    if (before == p.slots[r].name) continue;
    if (++changed > 8) continue;
    absl::StrAppend(&changes, "; member ", p.slots[r].name, " took rank ", r,
                    before.empty() ? "" : absl::StrCat(" from ", before));
  }
  if (changed > 8) absl::StrAppend(&changes, " and ", changed - 8, " more");
  EventLocked("propose",
              absl::StrCat("epoch ", p.epoch, " world ", world, " base epoch ",
                           p.base_epoch, ": ", p.reason, "; ",
                           ExplainWorld(world, static_cast<int>(healthy.size()),
                                        spec_.world, target_world_),
                           "; ", p.spares, " spare(s)", changes));
  if ((p.base_epoch > 0 && HoldsState()) || p.restore.active()) {
    const MoveSummary& s = p.summary;
    EventLocked(
        "moves",
        absl::StrCat("epoch ", p.epoch, ": ", s.moves, " moves, ",
                     s.bytes_moved, " bytes (lower bound ", s.lower_bound_bytes,
                     "), ", s.bytes_from_checkpoint, " from checkpoint"));
  }
}

bool Membership::PlanMovesLocked(EpochPlan& p) {
  const plan::Plan* next_plan = PlanLocked(p.world);
  const CheckpointRecord* newest = checkpoints_.Newest();
  if (next_plan == nullptr) return false;
  bool from_checkpoint = restore_next_;
  if (!from_checkpoint && (stable_.epoch == 0 || !HoldsState())) {
    return true;  // nothing held
  }
  if (!from_checkpoint) {
    const plan::Plan* base_plan = PlanLocked(stable_.world);
    std::vector<std::string> alive;
    for (int r = 0; r < stable_.world; ++r) {
      auto it = members_.find(stable_.slots[r].worker_id);
      if (it != members_.end() && IsLive(it->second.state)) {
        alive.push_back(it->first);
      }
    }
    absl::StatusOr<EpochMoves> moves =
        base_plan == nullptr ? absl::InternalError("no plan for the base epoch")
                             : PlanMembersMoves(spec_.model, *base_plan,
                                                stable_, alive, *next_plan, p);
    if (!moves.ok()) {
      ZSHARD_LOG_ERROR(absl::StrCat("epoch ", p.epoch,
                                    ": moves: ", moves.status().message()));
      return false;
    }
    if (moves->lost.empty()) {
      p.moves = std::move(moves->moves);
      p.summary = moves->summary;
      return true;
    }
    const std::string lost = DescribeLost(spec_.model, moves->lost.front());
    if (newest == nullptr) {
      FailJobLocked("lost", absl::StrCat(lost,
                                         " has no live holder and there is no "
                                         "checkpoint: the job cannot go on"));
      return false;
    }
    EventLocked(
        "rollback",
        absl::StrCat(lost, " has no live holder: epoch ", p.epoch,
                     " rolls back to the checkpoint of step ", newest->step));
  }
  if (newest == nullptr) {
    FailJobLocked("failed", "no checkpoint to restore from");
    return false;
  }
  absl::StatusOr<EpochMoves> moves =
      PlanCheckpointMoves(spec_.model, *newest, *next_plan, p);
  if (!moves.ok()) {
    FailJobLocked("failed", std::string(moves.status().message()));
    return false;
  }
  p.moves = std::move(moves->moves);
  p.summary = moves->summary;
  p.restore = RestoreRef{newest->step, newest->dir, newest->adam_step};
  return true;
}

void Membership::FailJobLocked(const std::string& kind,
                               const std::string& why) {
  if (failed_) return;
  failed_ = true;
  failure_reason_ = why;
  SaveMetaLocked();
  EventLocked(kind, why);
}

void Membership::AbandonLocked(const std::string& why) {
  EpochPlan p = *proposal_;
  p.reason = why;
  proposal_.reset();
  prepared_.clear();
  abandoned_ = p;
  ++stats_.abandons;
  SaveEpochLocked(p, EpochStatus::kAbandoned, true);
  PublishLocked(PlanPhase::kAbandoned, p);
  HistoryLocked(p, "abandoned");
  EventLocked("abandon", absl::StrCat("epoch ", p.epoch, ": ", why));
}

bool Membership::AllPreparedLocked() const {
  for (int r = 0; r < proposal_->world; ++r) {
    if (prepared_.count(proposal_->slots[r].worker_id) == 0) return false;
  }
  for (int r = 0; r < stable_.world; ++r) {
    const std::string& id = stable_.slots[r].worker_id;
    auto it = members_.find(id);
    if (it != members_.end() && IsLive(it->second.state) &&
        prepared_.count(id) == 0) {
      return false;
    }
  }
  return true;
}

void Membership::CommitLocked() {
  EpochPlan p = *proposal_;
  if (p.restore.active()) {
    p.resume_step = p.restore.step;
    p.resume_adam_step = p.restore.adam_step;
  } else {
    // The idle workload holds no optimizer state and steps without
    // collectives, so its members stop at different steps: none is a
    // holder, and the highest step is the resume step.
    const bool holds_state = HoldsState();
    std::vector<PreparedAck> holders, others;
    for (const auto& [id, ack] : prepared_) {
      (holds_state && RankIn(stable_, id) >= 0 ? holders : others)
          .push_back(ack);
    }
    absl::StatusOr<CommitPoint> point = ResolveCommitPoint(holders, others);
    if (!point.ok()) {
      const std::string why = absl::StrCat(
          "ranks cannot resume from one step: ", point.status().message());
      AbandonLocked(why);
      if (checkpoints_.Newest() == nullptr) {
        FailJobLocked("failed", absl::StrCat(why, "; there is no checkpoint"));
      } else {
        restore_next_ = true;
        SaveMetaLocked();
        change_reason_ = why;
      }
      return;
    }
    p.resume_step = point->resume_step;
    p.resume_adam_step = point->resume_adam_step;
    p.finish_pending_step = point->finish_pending_step;
    p.commit_values = point->commit_values;
  }
  if (committed_.epoch > 0 && !committed_stable_) {
    // Superseded before it became stable.
    SaveEpochLocked(committed_, EpochStatus::kBroken, true);
    HistoryLocked(committed_, "broken");
  }
  for (auto& [id, m] : members_) {
    int rank = RankIn(p, id);
    MemberState state = m.state;
    if (rank >= 0) {
      state = MemberState::kActive;
    } else if (state == MemberState::kJoining ||
               state == MemberState::kActive) {
      state = MemberState::kSpare;
    }
    if (rank != m.rank || state != m.state) {
      m.rank = rank;
      m.state = state;
      DirtyLocked(m);
    }
  }
  p.committed_ms = clock_->NowMs();
  committed_ = p;
  committed_stable_ = false;
  committed_senders_.clear();
  for (const plan::Move& mv : p.moves) {
    if (!mv.source_member.empty()) committed_senders_.insert(mv.source_member);
  }
  restore_next_ = false;
  active_acks_.clear();
  proposal_.reset();
  prepared_.clear();
  ++stats_.commits;
  stats_.epoch = p.epoch;
  SaveEpochLocked(p, EpochStatus::kCommitted, true);
  SaveMetaLocked();
  PublishLocked(PlanPhase::kCommitted, p);
  HistoryLocked(p, "in progress");
  EventLocked(
      "commit",
      absl::StrCat(
          "epoch ", p.epoch, " world ", p.world, " resume step ", p.resume_step,
          p.finish_pending_step ? absl::StrCat(" (pending ranks finish step ",
                                               p.resume_step, " first)")
                                : "",
          p.restore.active()
              ? absl::StrCat(" from the checkpoint of step ", p.restore.step)
              : ""));
}

void Membership::StableLocked() {
  committed_stable_ = true;
  committed_.duration_ms =
      std::max<int64_t>(0, clock_->NowMs() - committed_.committed_ms);
  stable_ = committed_;
  committed_senders_.clear();
  if (!committed_.moves.empty()) {
    ++stats_.reshards;
    stats_.reshard_bytes += committed_.summary.bytes_moved;
    stats_.last_reshard_seconds =
        static_cast<double>(committed_.duration_ms) / 1000.0;
  }
  SaveEpochLocked(committed_, EpochStatus::kStable, true);
  PublishLocked(PlanPhase::kStable, committed_);
  HistoryLocked(committed_, "stable");
  EventLocked(
      "stable",
      absl::StrCat("epoch ", committed_.epoch, " active on ", committed_.world,
                   " ranks, ", committed_.duration_ms, " ms after the commit"));
}

absl::StatusOr<PlanPhase> Membership::AckPrepared(const std::string& worker_id,
                                                  const std::string& token,
                                                  int64_t epoch, int64_t step,
                                                  bool commit_point_passed) {
  PreparedAck ack;
  ack.step = step;
  ack.adam_step = step;
  ack.commit_point_passed = commit_point_passed;
  return AckPrepared(worker_id, token, epoch, ack);
}

absl::StatusOr<PlanPhase> Membership::AckPrepared(const std::string& worker_id,
                                                  const std::string& token,
                                                  int64_t epoch,
                                                  const PreparedAck& ack) {
  if (ack.step < 0 || ack.adam_step < 0) {
    return absl::InvalidArgumentError("step and adam_step must be >= 0");
  }
  if (ack.commit_values.size() > 64) {
    return absl::InvalidArgumentError("more than 64 commit values");
  }
  absl::MutexLock lock(&mu_);
  ZSHARD_ASSIGN_OR_RETURN(Member * m, SessionLocked(worker_id, token));
  if (epoch == committed_.epoch && epoch > 0) {
    return committed_stable_ ? PlanPhase::kStable : PlanPhase::kCommitted;
  }
  if (!proposal_ || proposal_->epoch != epoch) {
    if (abandoned_ && abandoned_->epoch == epoch) {
      return absl::FailedPreconditionError(
          absl::StrCat("epoch ", epoch, " was abandoned"));
    }
    return absl::FailedPreconditionError(
        absl::StrCat("epoch ", epoch, " is not proposed (committed epoch ",
                     committed_.epoch, ")"));
  }
  if (RankIn(*proposal_, m->worker_id) < 0 &&
      RankIn(stable_, m->worker_id) < 0) {
    return PlanPhase::kProposed;  // neither a rank nor a sender
  }
  m->step = std::max(m->step, ack.step);
  prepared_[m->worker_id] = ack;
  if (!AllPreparedLocked()) return PlanPhase::kProposed;
  CommitLocked();
  const PlanPhase phase =
      committed_.epoch == epoch ? PlanPhase::kCommitted : PlanPhase::kAbandoned;
  ReconcileLocked();
  ForgetGoneLocked();
  FlushLocked();
  return phase;
}

absl::StatusOr<PlanPhase> Membership::AckActive(const std::string& worker_id,
                                                const std::string& token,
                                                int64_t epoch) {
  absl::MutexLock lock(&mu_);
  ZSHARD_ASSIGN_OR_RETURN(Member * m, SessionLocked(worker_id, token));
  if (epoch != committed_.epoch || epoch == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("epoch ", epoch, " is not the committed epoch (",
                     committed_.epoch, ")"));
  }
  if (committed_stable_) return PlanPhase::kStable;
  if (RankIn(committed_, m->worker_id) < 0) return PlanPhase::kCommitted;
  active_acks_.insert(m->worker_id);
  for (int r = 0; r < committed_.world; ++r) {
    if (active_acks_.count(committed_.slots[r].worker_id) == 0) {
      return PlanPhase::kCommitted;
    }
  }
  StableLocked();
  ReconcileLocked();
  ForgetGoneLocked();
  FlushLocked();
  return PlanPhase::kStable;
}

absl::Status Membership::CheckEpochLocked(int64_t epoch) const {
  if (epoch > 0 &&
      (epoch == committed_.epoch || (proposal_ && proposal_->epoch == epoch))) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "epoch ", epoch, " is stale (committed ", committed_.epoch,
      proposal_ ? absl::StrCat(", proposed ", proposal_->epoch) : "", ")"));
}

absl::Status Membership::CheckEpoch(int64_t epoch) {
  absl::MutexLock lock(&mu_);
  return CheckEpochLocked(epoch);
}

void Membership::CheckFinishedLocked() {
  if (finished_ || spec_.workload.steps == 0 || committed_.epoch == 0 ||
      !committed_stable_) {
    return;
  }
  for (int r = 0; r < committed_.world; ++r) {
    auto it = members_.find(committed_.slots[r].worker_id);
    if (it == members_.end() || it->second.step < spec_.workload.steps) return;
  }
  finished_ = true;
  SaveMetaLocked();
  EventLocked("finished",
              absl::StrCat("every rank reached step ", spec_.workload.steps));
}

}  // namespace zshard::server
