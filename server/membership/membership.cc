// Membership: creation and restore, sessions, joins, heartbeats, leaves,
// suspects, drains and leases. Transitions live in transition.cc.
#include "server/membership/membership.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/plan/plan.h"
#include "common/status.h"
#include "server/membership/transition/world_policy.h"

namespace zshard::server {
namespace {

LeasePolicy LeasePolicyOf(const job::JobSpec& spec,
                          const MembershipOptions& options) {
  LeasePolicy p;
  p.lease_timeout_ms = spec.lease_timeout_ms;
  p.isolation_fraction = spec.isolation_fraction;
  p.suspect_window_ms =
      options.suspect_window_ms > 0
          ? options.suspect_window_ms
          : std::min(2 * spec.heartbeat_interval_ms, spec.lease_timeout_ms / 2);
  p.suspect_grace_ms =
      options.suspect_grace_ms > 0
          ? options.suspect_grace_ms
          : std::min(3 * spec.heartbeat_interval_ms, spec.lease_timeout_ms);
  return p;
}

// The reshard history's outcome of a stored epoch.
const char* OutcomeOf(EpochStatus status) {
  if (status == EpochStatus::kStable) return "stable";
  if (status == EpochStatus::kAbandoned) return "abandoned";
  if (status == EpochStatus::kBroken) return "broken";
  return "in progress";
}

}  // namespace

Membership::Membership(job::JobSpec spec, Clock* clock, StateStore* store,
                       MembershipOptions options)
    : spec_(std::move(spec)),
      clock_(clock),
      options_(options),
      members_(LeasePolicyOf(spec_, options)),
      leases_(members_.leases()),
      world_(&spec_),
      checkpoints_(&spec_, options.write_manifest),
      history_(options.history_size),
      publisher_(
          store,
          PublisherOptions{options.update_log_size, options.event_log_size},
          [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
            // Called by the publisher within a change, under mu_.
            StageFactsLocked();
          }) {}

absl::StatusOr<std::unique_ptr<Membership>> Membership::Create(
    job::JobSpec spec, Clock* clock, StateStore* store,
    MembershipOptions options) {
  const int max = spec.world.max;
  std::optional<plan::Plan> max_plan;
  std::optional<plan::ParallelPlan> max_parallel;
  if (spec.parallel.model_parallel()) {
    auto p = plan::MakeParallelPlan(job::JobParallelModel(spec),
                                    job::JobParallelPlanOptions(spec, max));
    if (!p.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("job plan at world.max: ", p.status().message()));
    }
    max_parallel = *std::move(p);
  } else {
    auto p = plan::MakePlan(spec.model, job::JobPlanOptions(spec, max));
    if (!p.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("job plan at world.max: ", p.status().message()));
    }
    max_plan = *std::move(p);
  }
  std::unique_ptr<Membership> m(
      new Membership(std::move(spec), clock, store, options));
  absl::MutexLock lock(&m->mu_);
  if (max_plan.has_value()) m->world_.plans().Put(max, *std::move(max_plan));
  if (max_parallel.has_value()) {
    m->world_.plans().PutParallel(max, *std::move(max_parallel));
  }
  StoredState state;
  if (store != nullptr) {
    ZSHARD_ASSIGN_OR_RETURN(state, store->Load());
  }
  if (m->options_.restore.has_value() && !state.job_name.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("--restore needs a fresh state dir; it holds job '",
                     state.job_name, "'"));
  }
  if (store != nullptr) {
    if (!state.job_name.empty() && state.job_name != m->spec_.name) {
      return absl::FailedPreconditionError(
          absl::StrCat("state dir holds job '", state.job_name, "', not '",
                       m->spec_.name, "'"));
    }
    ZSHARD_RETURN_IF_ERROR(
        store->SaveJob(m->spec_.name, job::JobSpecToJson(m->spec_)));
    ZSHARD_ASSIGN_OR_RETURN(std::vector<Event> recent,
                            store->RecentEvents(options.event_log_size));
    m->publisher_.RestoreEvents(std::move(recent));
    ZSHARD_RETURN_IF_ERROR(m->RestoreLocked(state));
  }
  if (m->options_.restore.has_value()) {
    CheckpointRecord c = *m->options_.restore;
    c.job = m->spec_.name;
    m->checkpoints_.Commit(c);
    m->checkpoints_.set_restore_next(true);
    m->publisher_.batch().AddCheckpoint(c);
    m->SaveMetaLocked();
    m->EventLocked(
        "restore",
        absl::StrCat("job starts from the checkpoint of step ", c.step, " in ",
                     c.dir, " (", c.files.size(), " files, world ", c.world,
                     ", instances ", c.instances, ")"));
  }
  // A phase restored from the store gets a whole timeout from now.
  m->health_.phase_since_ms = clock->NowMs();
  m->members_.TickAfterPause(m->health_.phase_since_ms, 0);
  m->ReconcileLocked();
  m->FlushLocked();
  m->publisher_.WaitApplied(m->publisher_.last_ticket());
  return m;
}

absl::Status Membership::RestoreLocked(const StoredState& state) {
  auto meta = [&](const char* key, int64_t fallback) {
    auto it = state.meta.find(key);
    return it == state.meta.end() ? fallback : it->second;
  };
  int64_t next_epoch = meta("next_epoch", 1);
  members_.set_next_join_seq(meta("next_join_seq", 1));
  world_.set_target(static_cast<int>(meta("target_world", 0)));
  const bool failed = meta("failed", 0) != 0;
  checkpoints_.set_restore_next(meta("restore_next", 0) != 0);
  std::string failure_reason;
  if (failed) {
    failure_reason = "the job failed before the coordinator restarted";
    for (const Event& e : publisher_.events()
                              ->After(0, std::max(1, options_.event_log_size))
                              .events) {
      if (e.kind == "lost" || e.kind == "failed") failure_reason = e.reason;
    }
  }
  job_.Restore(meta("finished", 0) != 0, failed, std::move(failure_reason));
  for (const CheckpointRecord& c : state.checkpoints) checkpoints_.Commit(c);
  for (const StoredEpoch& e : state.history) {
    history_.Record(e.plan, OutcomeOf(e.status));
  }
  members_.Restore(state.members, clock_->NowMs());
  EpochPlan committed, stable;
  bool committed_stable = true;
  for (const StoredEpoch& e : state.epochs) {
    next_epoch = std::max(next_epoch, e.plan.epoch + 1);
    bool is_committed =
        e.status == EpochStatus::kCommitted || e.status == EpochStatus::kStable;
    if (is_committed && e.plan.epoch > committed.epoch) {
      committed = e.plan;
      committed_stable = e.status == EpochStatus::kStable;
    }
    if (e.status == EpochStatus::kStable && e.plan.epoch > stable.epoch) {
      stable = e.plan;
    }
  }
  transition_.Restore(std::move(committed), committed_stable, std::move(stable),
                      next_epoch);
  for (const StoredEpoch& e : state.epochs) {
    if (e.status == EpochStatus::kProposed &&
        e.plan.epoch > transition_.committed().epoch) {
      EpochPlan p = e.plan;
      p.reason = "coordinator restarted during the transition";
      publisher_.batch().SaveEpoch(p, EpochStatus::kAbandoned, false);
      PublishLocked(PlanPhase::kAbandoned, p);
      transition_.RestoreAbandoned(p);
      EventLocked("abandon", absl::StrCat("epoch ", p.epoch, ": ", p.reason));
    }
  }
  publisher_.Snapshot(transition_);
  if (!state.job_name.empty()) {
    EventLocked("restart", absl::StrCat("restored ", members_.all().size(),
                                        " members at epoch ",
                                        transition_.committed().epoch));
  }
  return absl::OkStatus();
}

absl::StatusOr<JoinReply> Membership::Join(const JoinArgs& args) {
  ZSHARD_RETURN_IF_ERROR(MemberTable::CheckJoinArgs(args));
  Change lock(this);
  Member* prev = members_.FindLive(args.name);
  size_t live = members_.live_count() - (prev == nullptr ? 0 : 1);
  if (live >= static_cast<size_t>(options_.max_live_members)) {
    return absl::ResourceExhaustedError(
        absl::StrCat("job has ", live, " live members, the most it accepts"));
  }
  if (prev != nullptr) {
    GoneLocked(*prev, MemberState::kDead, "fenced by a newer incarnation");
  }
  const Member& m = members_.Add(args, clock_->NowMs());
  JoinReply reply{m.worker_id, m.token, transition_.committed().epoch};
  publisher_.batch().Dirty(m.worker_id);
  ChangeLocked(absl::StrCat("member ", m.name, " joined"));
  EventLocked("join", absl::StrCat(settle_.reason(), " as ", m.worker_id));
  SaveMetaLocked();
  ReconcileLocked();
  ForgetGoneLocked();
  FlushLocked();
  return reply;
}

absl::StatusOr<MemberState> Membership::ReportSuspect(
    const std::string& worker_id, const std::string& token, int64_t epoch,
    const std::string& suspect_id, int suspect_rank,
    const std::string& reason) {
  Change lock(this);
  ZSHARD_ASSIGN_OR_RETURN(Member * reporter,
                          members_.Session(worker_id, token));
  ZSHARD_RETURN_IF_ERROR(transition_.CheckEpoch(epoch));
  Member* suspect = nullptr;
  if (!suspect_id.empty()) {
    suspect = members_.Find(suspect_id);
    if (suspect == nullptr) {
      return absl::NotFoundError(
          absl::StrCat("suspect worker '", suspect_id, "' is unknown"));
    }
  } else {
    const EpochPlan& p = epoch == transition_.committed().epoch
                             ? transition_.committed()
                             : *transition_.proposal();
    if (suspect_rank < 0 || suspect_rank >= p.world) {
      return absl::InvalidArgumentError(absl::StrCat(
          "suspect rank ", suspect_rank, " is not in epoch ", epoch));
    }
    suspect = members_.Find(p.slots[suspect_rank].worker_id);
    if (suspect == nullptr) {
      return absl::NotFoundError(
          absl::StrCat("suspect rank ", suspect_rank, " has no member"));
    }
  }
  if (suspect == reporter) {
    return absl::InvalidArgumentError("a worker cannot suspect itself");
  }
  if (!IsLive(suspect->state)) return suspect->state;
  int64_t now = clock_->NowMs();
  std::string why = absl::StrCat("reported by ", reporter->name, ": ",
                                 MemberTable::ClipReason(reason));
  const bool unwatched = suspect->lease->unwatched_since_ms.load() >= 0;
  if (unwatched || members_.SilentTooLong(*suspect, now)) {
    ChangeLocked(absl::StrCat(
        "member ", suspect->name, " suspect confirmed (",
        unwatched
            ? std::string("its plan watch closed")
            : absl::StrCat("silent ", members_.SilenceMs(*suspect, now), " ms"),
        ")"));
    NoteReportedLocked(*suspect, now);
    GoneLocked(*suspect, MemberState::kDead,
               absl::StrCat("suspect confirmed, ", why));
    ReconcileLocked();
  } else if (members_.MarkSuspect(*suspect, now)) {
    EventLocked("suspect", absl::StrCat("member ", suspect->name, " ", why));
  }
  FlushLocked();
  return suspect->state;
}

absl::StatusOr<bool> Membership::Leave(const std::string& worker_id,
                                       const std::string& token,
                                       const std::string& reason) {
  Change lock(this);
  ZSHARD_ASSIGN_OR_RETURN(Member * m, members_.Session(worker_id, token));
  const std::string why =
      reason.empty() ? "left" : MemberTable::ClipReason(reason);
  if (HoldsState() && job_.running() &&
      transition_.RankInStable(m->worker_id) >= 0) {
    // It holds state of the stable epoch: hand it over first.
    if (m->state != MemberState::kDraining) {
      const std::string change =
          absl::StrCat("member ", m->name, " is leaving");
      DrainLocked(
          *m, absl::StrCat("leaving (", why, "), handing over its state"),
          change,
          absl::StrCat(change, ": ", why, "; it hands over its state first"));
    }
    return true;
  }
  ChangeLocked(absl::StrCat("member ", m->name, " left"));
  GoneLocked(*m, MemberState::kLeft, why);
  ReconcileLocked();
  ForgetGoneLocked();
  FlushLocked();
  return false;
}

absl::Status Membership::Drain(const std::string& name) {
  Change lock(this);
  Member* m = members_.FindLive(name);
  if (m == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("worker '", name, "' is not a live member"));
  }
  if (m->state == MemberState::kDraining) return absl::OkStatus();
  const std::string change = absl::StrCat("member ", name, " drained");
  DrainLocked(*m, "drained by admin", change, change);
  return absl::OkStatus();
}

void Membership::DrainLocked(Member& m, const std::string& reason,
                             const std::string& change,
                             const std::string& event) {
  members_.MarkDraining(m, reason);
  publisher_.batch().Dirty(m.worker_id);
  ChangeLocked(change);
  EventLocked("drain", event);
  if (transition_.RankInProposal(m.worker_id) >= 0) {
    AbandonLocked(settle_.reason());
  }
  ReconcileLocked();
  FlushLocked();
}

absl::StatusOr<int> Membership::SetTargetWorld(int world) {
  const job::WorldSpec& w = spec_.world;
  const int step = job::WorldStep(w);
  if (world != 0 && (world < w.min || world > w.max || world % step != 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "target world ", world, " must be 0 or a multiple of ",
        w.resize == job::ResizePolicy::kKeepD ? "D=" : "I=", step, " in [",
        w.min, ", ", w.max, "] (", job::ResizePolicyName(w.resize), ")"));
  }
  Change lock(this);
  world_.set_target(world);
  ChangeLocked(absl::StrCat("target world set to ", world));
  EventLocked("target", settle_.reason());
  SaveMetaLocked();
  ReconcileLocked();
  FlushLocked();
  return world;
}

void Membership::Tick() {
  publisher_.Retry();  // what a failed store write left queued
  Change lock(this);
  const int64_t now = clock_->NowMs();
  if (const int64_t gap =
          members_.TickAfterPause(now, options_.pause_grace_gap_ms);
      gap > 0) {
    EventLocked("pause",
                absl::StrCat("no tick for ", gap,
                             " ms: every live member gets one lease of grace"));
  }
  for (const Expiry& e : ExpiredLocked(now)) {
    ChangeLocked(e.change);
    if (!e.lease_expired) NoteReportedLocked(*members_.Find(e.worker_id), now);
    GoneLocked(*members_.Find(e.worker_id), MemberState::kDead, e.reason);
  }
  CheckTransitionTimeoutsLocked();
  CheckStepFailureLocked();
  ReconcileLocked();
  ForgetGoneLocked();
  FlushLocked();
}

void Membership::WatchOpened(const std::string& worker_id) {
  std::shared_ptr<MemberLease> lease = leases_->Find(worker_id);
  if (lease == nullptr) return;
  lease->watches.fetch_add(1);
  lease->unwatched_since_ms.store(-1);
}

void Membership::WatchClosed(const std::string& worker_id) {
  std::shared_ptr<MemberLease> lease = leases_->Find(worker_id);
  if (lease == nullptr) return;
  if (lease->watches.fetch_sub(1) == 1) {
    lease->unwatched_since_ms.store(clock_->NowMs());
  }
}

void Membership::NoteReportedLocked(const Member& m, int64_t now) {
  int64_t since = m.lease->suspect_since_ms.load();
  if (since < 0) since = now;
  if (health_.reported_since_ms < 0 || since < health_.reported_since_ms) {
    health_.reported_since_ms = since;
  }
}

std::vector<Expiry> Membership::ExpiredLocked(int64_t now) {
  std::vector<Expiry> expired = members_.Expired(now);
  int lapsed = 0;
  for (const Expiry& e : expired) lapsed += e.lease_expired ? 1 : 0;
  const int live = static_cast<int>(members_.live_count());
  const int64_t since = members_.isolation().since_ms();
  // Counting the silent is a scan: only when a lease ran out, or while
  // isolated.
  const int silent = lapsed > 0 || since >= 0 ? members_.SilentCount(now) : 0;
  switch (members_.isolation().Check(lapsed, silent, live, now)) {
    case IsolationGuard::Step::kNone:
      return expired;
    case IsolationGuard::Step::kStarted:
      EventLocked(
          "isolated",
          absl::StrCat(silent, " of ", live, " live members silent at once, ",
                       lapsed, " past their lease (", spec_.lease_timeout_ms,
                       " ms): the coordinator is more likely cut off from "
                       "them than they all died; it declares no one dead and "
                       "waits (isolation_fraction ",
                       spec_.isolation_fraction, ")"));
      break;
    case IsolationGuard::Step::kHeld:
      break;
    case IsolationGuard::Step::kEnded:
      members_.RearmLeases(now);
      EventLocked(
          "isolation_ended",
          absl::StrCat("after ", now - since, " ms: ", lapsed, " of ", live,
                       " live members still silent; each gets one "
                       "more lease"));
      return {};
  }
  // Isolated: silence alone judges no one. A member a peer reported, and
  // that stayed silent through the suspect grace, is dead all the same:
  // the coordinator heard that peer.
  expired.erase(std::remove_if(expired.begin(), expired.end(),
                               [](const Expiry& e) { return e.lease_expired; }),
                expired.end());
  return expired;
}

void Membership::GoneLocked(Member& m, MemberState state,
                            const std::string& reason) {
  if (!members_.MarkGone(m, state, reason)) return;
  publisher_.batch().Dirty(m.worker_id);
  EventLocked(state == MemberState::kDead ? "dead" : "leave",
              absl::StrCat("member ", m.name, ": ", reason));
  // The proposal needs it as a rank or as a source of moves.
  const EpochPlan* proposal = transition_.proposal();
  if (proposal != nullptr && (transition_.RankInProposal(m.worker_id) >= 0 ||
                              transition_.RankInStable(m.worker_id) >= 0)) {
    AbandonLocked(absl::StrCat("member ", m.name, ": ", reason));
  }
}

bool Membership::HealthyLocked(const Member& m) const {
  if (!IsLive(m.state) || m.state == MemberState::kDraining) return false;
  // Kept apart from a peer that is itself healthy: no world has both.
  const Quarantine* q =
      health_.links.QuarantineOf(m.worker_id, clock_->NowMs());
  if (q == nullptr) return true;
  const Member* peer = members_.Find(q->peer);
  return peer == nullptr || !IsLive(peer->state) ||
         peer->state == MemberState::kDraining;
}

void Membership::ForgetGoneLocked() {
  auto pinned = [&](const std::string& id) {
    return transition_.RankInCommitted(id) >= 0 ||
           transition_.RankInStable(id) >= 0 ||
           transition_.RankInProposal(id) >= 0;
  };
  for (const std::string& id :
       members_.Forget(options_.max_gone_members, pinned)) {
    publisher_.batch().Forget(id);
    health_.links.Forget(id);
  }
}

}  // namespace zshard::server
