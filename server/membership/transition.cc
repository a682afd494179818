// Membership: the two-phase epoch transition as the membership drives it
// (propose with moves, PREPARED acks from ranks and senders, commit with
// the resolved resume point, ACTIVE acks, stable, abandon). The phases and
// their records are EpochTransition's.
#include <algorithm>
#include <unordered_map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/plan/plan.h"
#include "common/status.h"
#include "server/membership/membership.h"
#include "server/membership/transition/parallel_policy.h"
#include "server/membership/transition/world_policy.h"

namespace zshard::server {
namespace {

// A step the transition's table refuses is a broken invariant of the
// membership: logged, never fatal.
void LogRefused(const absl::Status& s) {
  if (!s.ok()) ZSHARD_LOG_ERROR(std::string(s.message()));
}

}  // namespace

bool Membership::CommittedBrokenLocked() const {
  const EpochPlan& committed = transition_.committed();
  if (committed.epoch == 0) return false;
  for (int r = 0; r < committed.world; ++r) {
    if (!members_.IsLiveId(committed.slots[r].worker_id)) return true;
  }
  if (!transition_.committed_stable() &&
      health_.failed_epoch == committed.epoch) {
    return true;
  }
  if (health_.step_failed_epoch == committed.epoch) return true;
  // A sender that dies before the epoch is stable leaves its moves undone.
  if (!transition_.committed_stable()) {
    for (const std::string& id : transition_.committed_senders()) {
      if (!members_.IsLiveId(id)) return true;
    }
  }
  return false;
}

bool Membership::NeedsReplanLocked() const {
  const EpochPlan& committed = transition_.committed();
  if (committed.epoch == 0) return false;
  for (int r = 0; r < committed.world; ++r) {
    const Member* m = members_.Find(committed.slots[r].worker_id);
    if (m == nullptr || !HealthyLocked(*m)) return true;
  }
  return false;
}

void Membership::ReconcileLocked() {
  health_.committed_broken = CommittedBrokenLocked();
  if (!job_.running() || SettlingLocked()) return;
  const bool changed = settle_.Close();
  int healthy = 0;
  const int w = TargetWorldLocked(&healthy);
  const EpochPlan* proposal = transition_.proposal();
  if (proposal != nullptr) {
    // A proposal in flight is superseded, not queued behind, when a change
    // since it alters its world; otherwise the change waits for it.
    if (!changed || w == proposal->world || w == 0) return;
    ++health_.superseded;
    AbandonLocked(absl::StrCat("superseded: ", settle_.ProposalReason()));
  }
  const bool replan = health_.committed_broken || NeedsReplanLocked();
  const EpochPlan& committed = transition_.committed();
  if (committed.epoch > 0 && !health_.committed_broken) {
    if (!transition_.committed_stable()) return;  // change once stable
    if (!replan && (w == committed.world || w == 0)) {
      for (const std::string& id : members_.JoiningToSpare()) {
        publisher_.batch().Dirty(id);
      }
      return;
    }
  }
  if (w == 0) {
    const std::string why = world_.Unviable(healthy);
    if (world_.NoteUnviable(why)) {
      EventLocked("waiting", why);
      StageFactsLocked();  // waiting members are told why
    }
    return;
  }
  world_.Clear();
  // A broken epoch is proposed again only after its back-off.
  if (clock_->NowMs() < health_.retry_at_ms) return;
  ProposeLocked(w);
}

void Membership::ProposeLocked(int world) {
  if (options_.planning_hook) options_.planning_hook();
  const EpochPlan& stable = transition_.stable();
  std::vector<RankCandidate> candidates;
  std::vector<const Member*> healthy;
  for (const auto& [id, m] : members_.all()) {
    if (!HealthyLocked(m)) continue;
    healthy.push_back(&m);
    // Ranks of the stable epoch: that is where the state is (before the
    // first stable epoch no one holds state: keep the committed ranks).
    int prev = stable.epoch > 0 ? transition_.RankInStable(id) : m.rank;
    auto node = m.labels.find("node");
    candidates.push_back(
        {id, prev, m.state == MemberState::kSpare, m.join_seq,
         node == m.labels.end() ? std::string() : node->second});
  }
  const bool parallel = spec_.parallel.model_parallel();
  // A model-parallel job's instances are every slot's, over its
  // data-parallel domain of R x C ranks.
  const int dp = parallel ? world / spec_.parallel.slots() : world;
  const RankLayout layout{
      world,
      parallel ? job::JobParallelPlanOptions(spec_, world).instances
               : job::InstancesOf(spec_.world, world),
      spec_.world.resize};
  std::vector<std::string> ranks =
      parallel ? AssignParallelRanks(spec_, world, stable.world,
                                     std::move(candidates))
               : AssignRanks(layout, std::move(candidates));
  EpochPlan p;
  p.epoch = transition_.next_epoch();
  p.base_epoch = stable.epoch;
  p.world = world;
  p.world_before = stable.world;
  p.instances = layout.instances;
  p.plan_hash = world_.plans().Hash(world);
  p.reason = settle_.TakeProposalReason();
  p.proposed_ms = WallTimeMs();
  int d = dp / p.instances;
  auto slot_of = [this, parallel, world](const Member& m, int rank, int d) {
    Slot s{m.worker_id, m.name, m.address, rank, -1, -1, m.labels};
    if (rank >= 0) {
      // Inside the slot's data-parallel domain in a model-parallel job.
      const int in = parallel
                         ? plan::DataParallelRank(
                               spec_.parallel,
                               plan::PositionOf(spec_.parallel, world, rank))
                         : rank;
      s.instance = in / d;
      s.shard_rank = in % d;
    }
    return s;
  };
  for (int r = 0; r < world; ++r) {
    p.slots.push_back(slot_of(*members_.Find(ranks[r]), r, d));
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
  LogRefused(transition_.Propose(p));
  if (health_.reported_since_ms >= 0) {
    health_.detection.Observe(
        static_cast<double>(clock_->NowMs() - health_.reported_since_ms) /
        1000.0);
    health_.reported_since_ms = -1;
  }
  health_.phase_since_ms = clock_->NowMs();
  RecordEpochLocked(p, EpochStatus::kProposed, false, "in progress");
  SaveMetaLocked();
  PublishLocked(PlanPhase::kProposed, p);
  // Which ranks change hands, so a reader sees who replaces whom.
  std::string changes;
  int changed = 0;
  for (int r = 0; r < world; ++r) {
    const std::string before =
        r < stable.world ? stable.slots[r].name : std::string();
    if (before == p.slots[r].name) continue;
    if (++changed > 8) continue;
    absl::StrAppend(&changes, "; member ", p.slots[r].name, " took rank ", r,
                    before.empty() ? "" : absl::StrCat(" from ", before));
  }
  if (changed > 8) absl::StrAppend(&changes, " and ", changed - 8, " more");
  EventLocked(
      "propose",
      absl::StrCat("epoch ", p.epoch, " world ", world, " base epoch ",
                   p.base_epoch, ": ", p.reason, "; ",
                   world_.Explain(world, static_cast<int>(healthy.size())),
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

void Membership::FailJobLocked(const std::string& kind,
                               const std::string& why) {
  if (!job_.Fail(why)) return;
  SaveMetaLocked();
  EventLocked(kind, why);
}

void Membership::AbandonLocked(const std::string& why) {
  absl::StatusOr<EpochPlan> p = transition_.Abandon(why);
  if (!p.ok()) return LogRefused(p.status());
  RecordEpochLocked(*p, EpochStatus::kAbandoned, true, "abandoned");
  PublishLocked(PlanPhase::kAbandoned, *p);
  EventLocked("abandon", absl::StrCat("epoch ", p->epoch, ": ", why));
}

void Membership::CommitLocked() {
  absl::StatusOr<EpochPlan> resolved = transition_.ResolveCommit(HoldsState());
  if (!resolved.ok()) {
    const std::string why = absl::StrCat("ranks cannot resume from one step: ",
                                         resolved.status().message());
    AbandonLocked(why);
    if (checkpoints_.Newest() == nullptr) {
      FailJobLocked("failed", absl::StrCat(why, "; there is no checkpoint"));
    } else {
      checkpoints_.set_restore_next(true);
      SaveMetaLocked();
      settle_.set_reason(why);
    }
    return;
  }
  EpochPlan p = *std::move(resolved);
  if (transition_.committed().epoch > 0 && !transition_.committed_stable()) {
    // Superseded before it became stable.
    RecordEpochLocked(transition_.committed(), EpochStatus::kBroken, true,
                      "broken");
  }
  std::unordered_map<std::string, int> ranks;
  for (int r = 0; r < p.world; ++r) ranks.emplace(p.slots[r].worker_id, r);
  auto rank_of = [&ranks](const std::string& id) {
    auto it = ranks.find(id);
    return it == ranks.end() ? -1 : it->second;
  };
  for (const std::string& id : members_.Place(rank_of))
    publisher_.batch().Dirty(id);
  p.committed_ms = clock_->NowMs();
  health_.phase_since_ms = p.committed_ms;
  LogRefused(transition_.Commit(p));
  checkpoints_.set_restore_next(false);
  RecordEpochLocked(p, EpochStatus::kCommitted, true, "in progress");
  SaveMetaLocked();
  PublishLocked(PlanPhase::kCommitted, p);
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
  health_.avoid_sources.clear();
  health_.links.ClearCounts();  // its links work
  health_.breaks_in_row = 0;
  health_.retry_at_ms = 0;
  const EpochPlan& c = transition_.committed();
  LogRefused(transition_.MarkStable(
      std::max<int64_t>(0, clock_->NowMs() - c.committed_ms)));
  RecordEpochLocked(c, EpochStatus::kStable, true, "stable");
  PublishLocked(PlanPhase::kStable, c);
  EventLocked("stable",
              absl::StrCat("epoch ", c.epoch, " active on ", c.world,
                           " ranks, ", c.duration_ms, " ms after the commit"));
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
  Change lock(this);
  ZSHARD_ASSIGN_OR_RETURN(Member * m, members_.Session(worker_id, token));
  const EpochPlan& committed = transition_.committed();
  if (epoch == committed.epoch && epoch > 0) {
    return transition_.committed_stable() ? PlanPhase::kStable
                                          : PlanPhase::kCommitted;
  }
  const EpochPlan* proposal = transition_.proposal();
  if (proposal == nullptr || proposal->epoch != epoch) {
    const EpochPlan* abandoned = transition_.abandoned();
    if (abandoned != nullptr && abandoned->epoch == epoch) {
      return absl::FailedPreconditionError(
          absl::StrCat("epoch ", epoch, " was abandoned"));
    }
    return absl::FailedPreconditionError(
        absl::StrCat("epoch ", epoch, " is not proposed (committed epoch ",
                     committed.epoch, ")"));
  }
  if (transition_.RankInProposal(m->worker_id) < 0 &&
      transition_.RankInStable(m->worker_id) < 0) {
    return PlanPhase::kProposed;  // neither a rank nor a sender
  }
  members_.RaiseStep(*m, ack.step);
  auto live = [this](const std::string& id) { return members_.IsLiveId(id); };
  if (!transition_.AckPrepared(m->worker_id, ack, live)) {
    return PlanPhase::kProposed;
  }
  CommitLocked();
  const PlanPhase phase = transition_.committed().epoch == epoch
                              ? PlanPhase::kCommitted
                              : PlanPhase::kAbandoned;
  ReconcileLocked();
  ForgetGoneLocked();
  FlushLocked();
  return phase;
}

absl::StatusOr<PlanPhase> Membership::AckActive(const std::string& worker_id,
                                                const std::string& token,
                                                int64_t epoch) {
  Change lock(this);
  ZSHARD_ASSIGN_OR_RETURN(Member * m, members_.Session(worker_id, token));
  const EpochPlan& committed = transition_.committed();
  if (epoch != committed.epoch || epoch == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("epoch ", epoch, " is not the committed epoch (",
                     committed.epoch, ")"));
  }
  if (transition_.committed_stable()) return PlanPhase::kStable;
  if (transition_.RankInCommitted(m->worker_id) < 0) {
    return PlanPhase::kCommitted;
  }
  if (!transition_.AckActive(m->worker_id)) return PlanPhase::kCommitted;
  StableLocked();
  ReconcileLocked();
  ForgetGoneLocked();
  FlushLocked();
  return PlanPhase::kStable;
}

absl::Status Membership::CheckEpoch(int64_t epoch) {
  absl::MutexLock lock(&mu_);
  return transition_.CheckEpoch(epoch);
}

void Membership::CheckFinishedLocked() {
  const EpochPlan& committed = transition_.committed();
  if (!job_.running() || spec_.workload.steps == 0 || committed.epoch == 0 ||
      !transition_.committed_stable()) {
    return;
  }
  for (int r = 0; r < committed.world; ++r) {
    const Member* m = members_.Find(committed.slots[r].worker_id);
    if (m == nullptr || MemberTable::StepOf(*m) < spec_.workload.steps) {
      return;
    }
  }
  job_.Finish();
  SaveMetaLocked();
  EventLocked("finished",
              absl::StrCat("every rank reached step ", spec_.workload.steps));
}

}  // namespace zshard::server
