// Membership: transitions that cannot complete. A member reports that it
// could not prepare the committed epoch (FAILED ack), or a phase waits past
// the job's transition_timeout_ms. Either way an event says who and why, a
// damaged checkpoint is taken out of use, and the coordinator proposes again:
// no transition waits forever.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/plan/plan.h"
#include "common/status.h"
#include "server/membership/membership.h"

namespace zshard::server {
namespace {

// "a, b and 3 more" for the names of the members that did not answer.
std::string NameList(const std::vector<std::string>& names) {
  constexpr size_t kShown = 8;
  if (names.size() <= kShown) return absl::StrJoin(names, ", ");
  std::vector<std::string> shown(names.begin(), names.begin() + kShown);
  return absl::StrCat(absl::StrJoin(shown, ", "), " and ",
                      names.size() - kShown, " more");
}

}  // namespace

void Membership::BreakCommittedLocked() {
  health_.failed_epoch = transition_.committed().epoch;
  health_.committed_broken = true;
  BackOffLocked();
}

void Membership::BackOffLocked() {
  // The first break is proposed again at once; each one after it in a row
  // waits 100 ms, doubling, at most 10 s.
  constexpr int64_t kFirstMs = 100;
  constexpr int64_t kMaxMs = 10000;
  const int doublings = std::min(health_.breaks_in_row, 11);
  health_.retry_at_ms =
      doublings == 0
          ? 0
          : clock_->NowMs() + std::min(kMaxMs, kFirstMs << (doublings - 1));
  ++health_.breaks_in_row;
}

void Membership::LinkFailedLocked(const Member& reporter, int64_t epoch,
                                  const PrepareFailure& failure) {
  const EpochPlan& committed = transition_.committed();
  if (failure.peer_rank < 0 || epoch != committed.epoch ||
      failure.peer_rank >= committed.world) {
    return;
  }
  Member* peer = members_.Find(committed.slots[failure.peer_rank].worker_id);
  if (peer == nullptr || peer->worker_id == reporter.worker_id) return;
  const auto [count, fresh] =
      health_.links.Record(reporter.worker_id, peer->worker_id, epoch);
  if (!fresh) return;
  const std::string link =
      absl::StrCat("member ", reporter.name, " <-> member ", peer->name,
                   failure.peer_group.empty()
                       ? std::string()
                       : absl::StrCat(" (group ", failure.peer_group, ")"));
  EventLocked("link_failed",
              absl::StrCat("epoch ", epoch, ": ", link,
                           failure.peer_closed ? " closed: " : " not made: ",
                           MemberTable::ClipReason(failure.error), " (failure ",
                           count, " of this pair)"));
  if (count < 2 || !IsLive(peer->state)) return;
  auto later = [this](const std::string& a, const std::string& b) {
    const Member* ma = members_.Find(a);
    const Member* mb = members_.Find(b);
    return ma != nullptr && mb != nullptr && ma->join_seq > mb->join_seq;
  };
  // What replacing a member moves: its committed rank's shard, 12 bytes an
  // element (master, m, v); nothing for a spare.
  auto moved = [this, &committed](const std::string& id) -> int64_t {
    const plan::Plan* plan = world_.plans().Get(committed.world);
    if (plan == nullptr) return 0;
    for (int rank = 0; rank < committed.world; ++rank) {
      if (committed.slots[rank].worker_id != id) continue;
      int64_t elements = 0;
      for (const plan::Shard& shard :
           plan::MakeRankPlan(spec_.model, *plan, rank).shards) {
        for (const plan::Piece& piece : shard.pieces) {
          elements += piece.param_end - piece.param_start;
        }
      }
      return 12 * elements;
    }
    return 0;
  };
  const std::string out = health_.links.ChooseEnd(
      reporter.worker_id, peer->worker_id, moved, later);
  const Member* excluded = out == reporter.worker_id ? &reporter : peer;
  const Member* other = out == reporter.worker_id ? peer : &reporter;
  Quarantine q;
  q.peer = other->worker_id;
  q.peer_name = other->name;
  q.until_ms = clock_->NowMs() + spec_.link_quarantine_ms;
  q.reason =
      absl::StrCat("its link to member ", other->name,
                   " failed twice: ", MemberTable::ClipReason(failure.error));
  EventLocked(
      "excluded",
      absl::StrCat("member ", excluded->name, " excluded: ", q.reason,
                   "; it stays a spare, kept out of any world with ",
                   other->name, " for ", spec_.link_quarantine_ms, " ms"));
  ChangeLocked(absl::StrCat("member ", excluded->name,
                            " excluded for a broken link to ", other->name));
  health_.links.Exclude(excluded->worker_id, std::move(q));
}

absl::StatusOr<PlanPhase> Membership::AckFailed(const std::string& worker_id,
                                                const std::string& token,
                                                int64_t epoch,
                                                const PrepareFailure& failure) {
  if (failure.error.empty()) {
    return absl::InvalidArgumentError("a FAILED ack needs its error");
  }
  Change lock(this);
  ZSHARD_ASSIGN_OR_RETURN(Member * m, members_.Session(worker_id, token));
  const EpochPlan& committed = transition_.committed();
  LinkFailedLocked(*m, epoch, failure);
  if (failure.step > 0 && epoch == committed.epoch && epoch != 0 &&
      transition_.committed_stable()) {
    StepFailedLocked(*m, epoch, failure);
    ReconcileLocked();  // an exclusion re-plans at once
    FlushLocked();
    return PlanPhase::kStable;
  }
  if (epoch != committed.epoch || epoch == 0 ||
      transition_.committed_stable()) {
    return absl::FailedPreconditionError(
        absl::StrCat("epoch ", epoch,
                     " is not the committed epoch in "
                     "transition (committed ",
                     committed.epoch, ")"));
  }
  if (health_.failed_epoch == epoch)
    return PlanPhase::kCommitted;  // already known
  ++health_.prepare_failures;
  EventLocked(
      "prepare_failed",
      absl::StrCat("epoch ", epoch, ": member ", m->name, " could not prepare",
                   failure.source.empty()
                       ? std::string()
                       : absl::StrCat(" (source ", failure.source, ")"),
                   ": ", failure.error));
  settle_.set_reason(absl::StrCat("member ", m->name,
                                  " could not prepare epoch ", epoch, ": ",
                                  failure.error));
  if (failure.source_is_checkpoint && committed.restore.active()) {
    const RestoreRef& bad = committed.restore;
    checkpoints_.MarkDamaged(bad.dir, failure.error);
    const CheckpointRecord* older = checkpoints_.Newest();
    EventLocked(
        "checkpoint_skipped",
        absl::StrCat("checkpoint of step ", bad.step, " (", bad.dir,
                     ") skipped: ", failure.error,
                     older == nullptr ? std::string("; no older checkpoint")
                                      : absl::StrCat("; restoring from step ",
                                                     older->step, " instead")));
    if (older == nullptr) {
      FailJobLocked(
          "lost",
          absl::StrCat("the checkpoint of step ", bad.step,
                       " is unusable and no older intact checkpoint exists: "
                       "the job cannot go on"));
    } else {
      checkpoints_.set_restore_next(true);
    }
    SaveMetaLocked();
  }
  if (!failure.source_is_checkpoint && !failure.source.empty()) {
    health_.avoid_sources.insert(failure.source);
  }
  BreakCommittedLocked();
  ReconcileLocked();
  ForgetGoneLocked();
  FlushLocked();
  return PlanPhase::kCommitted;
}

void Membership::CheckTransitionTimeoutsLocked() {
  const int64_t now = clock_->NowMs();
  const int64_t bound = spec_.transition_timeout_ms;
  if (const EpochPlan* p = transition_.proposal();
      p != nullptr && now - health_.phase_since_ms > bound) {
    std::vector<std::string> silent;
    for (int r = 0; r < p->world; ++r) {
      if (!transition_.HasPrepared(p->slots[r].worker_id)) {
        silent.push_back(p->slots[r].name);
      }
    }
    const EpochPlan& stable = transition_.stable();
    for (int r = 0; r < stable.world; ++r) {
      const std::string& id = stable.slots[r].worker_id;
      if (members_.IsLiveId(id) && !transition_.HasPrepared(id) &&
          RankIn(*p, id) < 0) {
        silent.push_back(stable.slots[r].name);
      }
    }
    const std::string why = absl::StrCat("no PREPARED ack within ", bound,
                                         " ms from ", NameList(silent));
    ++health_.timeouts;
    EventLocked("timeout", absl::StrCat("epoch ", p->epoch, ": ", why));
    settle_.set_reason(why);
    AbandonLocked(why);
    return;
  }
  const EpochPlan& c = transition_.committed();
  if (c.epoch > 0 && !transition_.committed_stable() &&
      transition_.proposal() == nullptr && health_.failed_epoch != c.epoch &&
      now - health_.phase_since_ms > bound) {
    std::vector<std::string> silent;
    for (int r = 0; r < c.world; ++r) {
      if (!transition_.HasActive(c.slots[r].worker_id)) {
        silent.push_back(c.slots[r].name);
      }
    }
    const std::string why = absl::StrCat("no ACTIVE ack within ", bound,
                                         " ms from ", NameList(silent));
    ++health_.timeouts;
    EventLocked("timeout", absl::StrCat("epoch ", c.epoch, ": ", why));
    settle_.set_reason(why);
    BreakCommittedLocked();
  }
}

}  // namespace zshard::server
