// Membership: the two-phase epoch transition (propose, PREPARED acks,
// commit with resume step, ACTIVE acks, abandon), the plan update log that
// WatchPlan streams, views, and the write batch to the store.
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/plan/plan.h"
#include "common/status.h"
#include "server/membership/membership.h"
#include "server/membership/world_policy.h"

namespace zshard::server {

bool Membership::CommittedBrokenLocked() const {
  if (committed_.epoch == 0) return false;
  for (int r = 0; r < committed_.world; ++r) {
    auto it = members_.find(committed_.slots[r].worker_id);
    if (it == members_.end() || !HealthyLocked(it->second)) return true;
  }
  return false;
}

std::string Membership::PlanHashLocked(int world) {
  auto it = hash_cache_.find(world);
  if (it != hash_cache_.end()) return it->second;
  auto p = plan::MakePlan(spec_.model, job::JobPlanOptions(spec_, world));
  std::string hash = p.ok() ? p->hash : "";
  hash_cache_[world] = hash;
  return hash;
}

void Membership::ReconcileLocked() {
  committed_broken_ = CommittedBrokenLocked();
  if (proposal_ || finished_) return;
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
    if (!committed_stable_) return;  // grow or shrink once stable
    if (w == committed_.world || w == 0) {
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
    candidates.push_back(
        {id, m.rank, m.state == MemberState::kSpare, m.join_seq});
  }
  std::vector<std::string> ranks = AssignRanks(world, std::move(candidates));
  EpochPlan p;
  p.epoch = next_epoch_++;
  p.base_epoch = committed_.epoch;
  p.world = world;
  p.instances = spec_.world.instances;
  p.plan_hash = PlanHashLocked(world);
  p.reason = change_reason_;
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
  proposal_ = p;
  prepared_.clear();
  abandoned_.reset();
  ++stats_.proposals;
  SaveEpochLocked(p, EpochStatus::kProposed);
  SaveMetaLocked();
  PublishLocked(PlanPhase::kProposed, p);
  // Which ranks change hands, so a reader sees who replaces whom.
  std::string changes;
  int changed = 0;
  for (int r = 0; r < world; ++r) {
    const std::string before =
        r < committed_.world ? committed_.slots[r].name : std::string();
    if (before == p.slots[r].name) continue;
    if (++changed > 8) continue;
    absl::StrAppend(&changes, "; member ", p.slots[r].name, " took rank ", r,
                    before.empty() ? "" : absl::StrCat(" from ", before));
  }
  if (changed > 8) absl::StrAppend(&changes, " and ", changed - 8, " more");
  EventLocked(
      "propose",
      absl::StrCat("epoch ", p.epoch, " world ", world, ": ", p.reason, "; ",
                   ExplainWorld(world, static_cast<int>(healthy.size()),
                                spec_.world, target_world_),
                   "; ", p.spares, " spare(s)", changes));
}

void Membership::AbandonLocked(const std::string& why) {
  EpochPlan p = *proposal_;
  p.reason = why;
  proposal_.reset();
  prepared_.clear();
  abandoned_ = p;
  ++stats_.abandons;
  SaveEpochLocked(p, EpochStatus::kAbandoned);
  PublishLocked(PlanPhase::kAbandoned, p);
  EventLocked("abandon", absl::StrCat("epoch ", p.epoch, ": ", why));
}

void Membership::CommitLocked() {
  EpochPlan p = *proposal_;
  for (const auto& [id, step] : prepared_) {
    p.resume_step = std::max(p.resume_step, step);
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
  committed_ = p;
  committed_stable_ = false;
  active_acks_.clear();
  proposal_.reset();
  prepared_.clear();
  ++stats_.commits;
  stats_.epoch = p.epoch;
  SaveEpochLocked(p, EpochStatus::kCommitted);
  PublishLocked(PlanPhase::kCommitted, p);
  EventLocked("commit", absl::StrCat("epoch ", p.epoch, " world ", p.world,
                                     " resume step ", p.resume_step));
}

absl::StatusOr<PlanPhase> Membership::AckPrepared(const std::string& worker_id,
                                                  const std::string& token,
                                                  int64_t epoch, int64_t step,
                                                  bool commit_point_passed) {
  if (step < 0) return absl::InvalidArgumentError("step must be >= 0");
  absl::MutexLock lock(&mu_);
  ZSHARD_ASSIGN_OR_RETURN(Member * m, SessionLocked(worker_id, token));
  (void)commit_point_passed;  // the idle workload has no optimizer state
  if (epoch == committed_.epoch && epoch > 0) return PlanPhase::kCommitted;
  if (!proposal_ || proposal_->epoch != epoch) {
    if (abandoned_ && abandoned_->epoch == epoch) {
      return absl::FailedPreconditionError(
          absl::StrCat("epoch ", epoch, " was abandoned"));
    }
    return absl::FailedPreconditionError(
        absl::StrCat("epoch ", epoch, " is not proposed (committed epoch ",
                     committed_.epoch, ")"));
  }
  if (RankIn(*proposal_, m->worker_id) < 0) return PlanPhase::kProposed;
  m->step = std::max(m->step, step);
  prepared_[m->worker_id] = step;
  if (static_cast<int>(prepared_.size()) < proposal_->world) {
    return PlanPhase::kProposed;
  }
  CommitLocked();
  ReconcileLocked();
  ForgetGoneLocked();
  FlushLocked();
  return PlanPhase::kCommitted;
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
  if (RankIn(committed_, m->worker_id) < 0 || committed_stable_) {
    return PlanPhase::kCommitted;
  }
  active_acks_.insert(m->worker_id);
  for (int r = 0; r < committed_.world; ++r) {
    if (active_acks_.count(committed_.slots[r].worker_id) == 0) {
      return PlanPhase::kCommitted;
    }
  }
  committed_stable_ = true;
  SaveEpochLocked(committed_, EpochStatus::kStable);
  EventLocked("stable", absl::StrCat("epoch ", epoch, " active on ",
                                     committed_.world, " ranks"));
  ReconcileLocked();
  FlushLocked();
  return PlanPhase::kCommitted;
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
