// Membership: creation and restore, sessions, joins, heartbeats, leaves,
// suspects, drains and leases. Transitions live in transition.cc.
#include "server/membership/membership.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/plan/plan.h"
#include "common/status.h"
#include "server/membership/token.h"
#include "server/membership/world_policy.h"

namespace zshard::server {
namespace {

constexpr size_t kMaxNameLen = 256;
constexpr size_t kMaxAddressLen = 256;
constexpr size_t kMaxLabels = 32;
constexpr size_t kMaxLabelKeyLen = 63;
constexpr size_t kMaxLabelValueLen = 256;
constexpr size_t kMaxReasonLen = 1024;

absl::Status CheckJoinArgs(const JoinArgs& a) {
  if (a.name.empty()) return absl::InvalidArgumentError("name is missing");
  if (a.name.size() > kMaxNameLen) {
    return absl::InvalidArgumentError(
        absl::StrCat("name is longer than ", kMaxNameLen, " characters"));
  }
  for (char c : a.name) {
    if (c <= ' ' || c > '~') {
      return absl::InvalidArgumentError(
          "name may hold only printable ascii without spaces");
    }
  }
  if (a.address.size() > kMaxAddressLen) {
    return absl::InvalidArgumentError(
        absl::StrCat("address is longer than ", kMaxAddressLen, " characters"));
  }
  if (a.labels.size() > kMaxLabels) {
    return absl::InvalidArgumentError(
        absl::StrCat("more than ", kMaxLabels, " labels"));
  }
  for (const auto& [k, v] : a.labels) {
    if (k.empty() || k.size() > kMaxLabelKeyLen) {
      return absl::InvalidArgumentError(absl::StrCat(
          "label key must have 1 to ", kMaxLabelKeyLen, " characters"));
    }
    if (v.size() > kMaxLabelValueLen) {
      return absl::InvalidArgumentError(absl::StrCat(
          "label '", k, "' is longer than ", kMaxLabelValueLen, " characters"));
    }
  }
  if (a.device.kind.size() > 32 || a.device.model.size() > kMaxNameLen) {
    return absl::InvalidArgumentError("device kind or model is too long");
  }
  return absl::OkStatus();
}

std::string Clip(const std::string& s) {
  return s.size() > kMaxReasonLen ? s.substr(0, kMaxReasonLen) : s;
}

}  // namespace

Membership::Membership(job::JobSpec spec, Clock* clock, StateStore* store,
                       MembershipOptions options)
    : spec_(std::move(spec)),
      clock_(clock),
      store_(store),
      options_(options),
      suspect_window_ms_(options.suspect_window_ms > 0
                             ? options.suspect_window_ms
                             : std::min(2 * spec_.heartbeat_interval_ms,
                                        spec_.lease_timeout_ms / 2)),
      suspect_grace_ms_(options.suspect_grace_ms > 0
                            ? options.suspect_grace_ms
                            : spec_.heartbeat_interval_ms * 3 / 2),
      events_(EventLogOptions{options.event_log_size}) {}

absl::StatusOr<std::unique_ptr<Membership>> Membership::Create(
    job::JobSpec spec, Clock* clock, StateStore* store,
    MembershipOptions options) {
  auto max_plan =
      plan::MakePlan(spec.model, job::JobPlanOptions(spec, spec.world.max));
  if (!max_plan.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("job plan at world.max: ", max_plan.status().message()));
  }
  std::unique_ptr<Membership> m(
      new Membership(std::move(spec), clock, store, options));
  absl::MutexLock lock(&m->mu_);
  m->hash_cache_[m->spec_.world.max] = max_plan->hash;
  m->plans_[m->spec_.world.max] =
      std::make_shared<const plan::Plan>(*std::move(max_plan));
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
    for (Event& e : recent) m->events_.Append(std::move(e));
    ZSHARD_RETURN_IF_ERROR(m->RestoreLocked(state));
  }
  if (m->options_.restore.has_value()) {
    CheckpointRecord c = *m->options_.restore;
    c.job = m->spec_.name;
    m->checkpoints_.Commit(c);
    m->stats_.checkpoints = 1;
    m->stats_.last_checkpoint_step = c.step;
    m->stats_.last_checkpoint_ms = c.committed_ms;
    m->restore_next_ = true;
    if (store != nullptr) m->pending_write_.checkpoints.push_back(c);
    m->SaveMetaLocked();
    m->EventLocked(
        "restore",
        absl::StrCat("job starts from the checkpoint of step ", c.step, " in ",
                     c.dir, " (", c.files.size(), " files, world ", c.world,
                     ", instances ", c.instances, ")"));
  }
  m->ReconcileLocked();
  m->FlushLocked();
  return m;
}

absl::Status Membership::RestoreLocked(const StoredState& state) {
  auto meta = [&](const char* key, int64_t fallback) {
    auto it = state.meta.find(key);
    return it == state.meta.end() ? fallback : it->second;
  };
  next_epoch_ = meta("next_epoch", 1);
  next_join_seq_ = meta("next_join_seq", 1);
  target_world_ = static_cast<int>(meta("target_world", 0));
  finished_ = meta("finished", 0) != 0;
  failed_ = meta("failed", 0) != 0;
  restore_next_ = meta("restore_next", 0) != 0;
  if (failed_) {
    failure_reason_ = "the job failed before the coordinator restarted";
    for (const Event& e :
         events_.After(0, std::max(1, options_.event_log_size)).events) {
      if (e.kind == "lost" || e.kind == "failed") failure_reason_ = e.reason;
    }
  }
  for (const CheckpointRecord& c : state.checkpoints) {
    checkpoints_.Commit(c);
    ++stats_.checkpoints;
    stats_.last_checkpoint_step = c.step;
    stats_.last_checkpoint_ms = c.committed_ms;
  }
  for (const StoredEpoch& e : state.history) {
    const char* outcome = "in progress";
    switch (e.status) {
      case EpochStatus::kStable:
        outcome = "stable";
        break;
      case EpochStatus::kAbandoned:
        outcome = "abandoned";
        break;
      case EpochStatus::kBroken:
        outcome = "broken";
        break;
      default:
        break;
    }
    HistoryLocked(e.plan, outcome);
  }
  int64_t now = clock_->NowMs();
  for (const Member& stored : state.members) {
    Member m = stored;
    m.last_heartbeat_ms = now;  // re-armed: one lease of grace
    m.suspect_since_ms = -1;
    if (IsLive(m.state)) live_by_name_[m.name] = m.worker_id;
    next_join_seq_ = std::max(next_join_seq_, m.join_seq + 1);
    members_[m.worker_id] = std::move(m);
  }
  for (const StoredEpoch& e : state.epochs) {
    next_epoch_ = std::max(next_epoch_, e.plan.epoch + 1);
    bool committed =
        e.status == EpochStatus::kCommitted || e.status == EpochStatus::kStable;
    if (committed && e.plan.epoch > committed_.epoch) {
      committed_ = e.plan;
      committed_stable_ = e.status == EpochStatus::kStable;
    }
    if (e.status == EpochStatus::kStable && e.plan.epoch > stable_.epoch) {
      stable_ = e.plan;
    }
  }
  if (!committed_stable_) {
    for (const plan::Move& mv : committed_.moves) {
      if (!mv.source_member.empty()) {
        committed_senders_.insert(mv.source_member);
      }
    }
  }
  for (const StoredEpoch& e : state.epochs) {
    if (e.status == EpochStatus::kProposed && e.plan.epoch > committed_.epoch) {
      EpochPlan p = e.plan;
      p.reason = "coordinator restarted during the transition";
      SaveEpochLocked(p, EpochStatus::kAbandoned);
      PublishLocked(PlanPhase::kAbandoned, p);
      abandoned_ = p;
      EventLocked("abandon", absl::StrCat("epoch ", p.epoch, ": ", p.reason));
    }
  }
  stats_.epoch = committed_.epoch;
  SnapshotLocked();
  if (!state.job_name.empty()) {
    EventLocked("restart",
                absl::StrCat("restored ", members_.size(), " members at epoch ",
                             committed_.epoch));
  }
  return absl::OkStatus();
}

Member* Membership::FindLocked(const std::string& worker_id) {
  auto it = members_.find(worker_id);
  return it == members_.end() ? nullptr : &it->second;
}

absl::StatusOr<Member*> Membership::SessionLocked(const std::string& worker_id,
                                                  const std::string& token) {
  if (worker_id.empty()) {
    return absl::InvalidArgumentError("worker_id is missing");
  }
  if (worker_id.size() > kMaxNameLen) {
    return absl::InvalidArgumentError("worker_id is too long");
  }
  Member* m = FindLocked(worker_id);
  if (m == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("worker '", worker_id, "' is unknown"));
  }
  if (token.empty() || !TokensEqual(token, m->token)) {
    return absl::UnauthenticatedError(
        absl::StrCat("token of worker '", worker_id, "' is invalid"));
  }
  if (!IsLive(m->state)) {
    return absl::UnauthenticatedError(absl::StrCat(
        "worker '", m->name, "' (", worker_id, ") is ",
        MemberStateName(m->state), ": ", m->reason, "; join again"));
  }
  return m;
}

absl::Status Membership::CheckSession(const std::string& worker_id,
                                      const std::string& token) {
  absl::MutexLock lock(&mu_);
  return SessionLocked(worker_id, token).status();
}

absl::StatusOr<JoinReply> Membership::Join(const JoinArgs& args) {
  ZSHARD_RETURN_IF_ERROR(CheckJoinArgs(args));
  absl::MutexLock lock(&mu_);
  auto old = live_by_name_.find(args.name);
  size_t live = live_by_name_.size() - (old == live_by_name_.end() ? 0 : 1);
  if (live >= static_cast<size_t>(options_.max_live_members)) {
    return absl::ResourceExhaustedError(
        absl::StrCat("job has ", live, " live members, the most it accepts"));
  }
  if (old != live_by_name_.end()) {
    Member* prev = FindLocked(old->second);
    if (prev != nullptr) {
      GoneLocked(*prev, MemberState::kDead, "fenced by a newer incarnation");
    }
  }
  Member m;
  m.worker_id = NewWorkerId();
  m.token = NewToken();
  m.name = args.name;
  m.address = args.address;
  m.labels = args.labels;
  m.device = args.device;
  m.state = MemberState::kJoining;
  m.join_seq = next_join_seq_++;
  m.last_heartbeat_ms = clock_->NowMs();
  JoinReply reply{m.worker_id, m.token, committed_.epoch};
  live_by_name_[m.name] = m.worker_id;
  DirtyLocked(m);
  change_reason_ = absl::StrCat("member ", m.name, " joined");
  EventLocked("join", absl::StrCat(change_reason_, " as ", m.worker_id));
  members_[m.worker_id] = std::move(m);
  SaveMetaLocked();
  ReconcileLocked();
  ForgetGoneLocked();
  FlushLocked();
  return reply;
}

absl::StatusOr<HeartbeatReply> Membership::Heartbeat(
    const std::string& worker_id, const std::string& token, int64_t epoch,
    int64_t step) {
  if (epoch < 0 || step < 0) {
    return absl::InvalidArgumentError("epoch and step must be >= 0");
  }
  absl::MutexLock lock(&mu_);
  ZSHARD_ASSIGN_OR_RETURN(Member * m, SessionLocked(worker_id, token));
  if (epoch >= next_epoch_) {
    return absl::FailedPreconditionError(
        absl::StrCat("epoch ", epoch, " was never proposed"));
  }
  m->epoch = epoch;
  m->step = step;
  m->last_heartbeat_ms = clock_->NowMs();
  m->suspect_since_ms = -1;
  if (spec_.workload.steps > 0 && step >= spec_.workload.steps) {
    CheckFinishedLocked();
  }
  HeartbeatReply reply;
  reply.epoch = committed_.epoch;
  reply.pending_epoch =
      proposal_ ? proposal_->epoch : (committed_stable_ ? 0 : committed_.epoch);
  reply.state = m->state;
  if (failed_) {
    reply.command = Command::kExit;
    reply.job_failed = true;
    reply.exit_reason = failure_reason_;
  } else if (finished_) {
    reply.command = Command::kExit;
  } else if (m->state == MemberState::kDraining &&
             (!proposal_ || RankIn(*proposal_, m->worker_id) < 0) &&
             RankIn(stable_, m->worker_id) < 0 &&
             RankIn(committed_, m->worker_id) < 0) {
    reply.command = Command::kDrain;
  } else if (committed_broken_ && m->rank >= 0) {
    reply.command = Command::kAbort;
  }
  FlushLocked();
  return reply;
}

absl::StatusOr<MemberState> Membership::ReportSuspect(
    const std::string& worker_id, const std::string& token, int64_t epoch,
    const std::string& suspect_id, int suspect_rank,
    const std::string& reason) {
  absl::MutexLock lock(&mu_);
  ZSHARD_ASSIGN_OR_RETURN(Member * reporter, SessionLocked(worker_id, token));
  ZSHARD_RETURN_IF_ERROR(CheckEpochLocked(epoch));
  Member* suspect = nullptr;
  if (!suspect_id.empty()) {
    suspect = FindLocked(suspect_id);
    if (suspect == nullptr) {
      return absl::NotFoundError(
          absl::StrCat("suspect worker '", suspect_id, "' is unknown"));
    }
  } else {
    const EpochPlan& p = epoch == committed_.epoch ? committed_ : *proposal_;
    if (suspect_rank < 0 || suspect_rank >= p.world) {
      return absl::InvalidArgumentError(absl::StrCat(
          "suspect rank ", suspect_rank, " is not in epoch ", epoch));
    }
    suspect = FindLocked(p.slots[suspect_rank].worker_id);
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
  std::string why =
      absl::StrCat("reported by ", reporter->name, ": ", Clip(reason));
  if (now - suspect->last_heartbeat_ms > suspect_window_ms_) {
    change_reason_ =
        absl::StrCat("member ", suspect->name, " suspect confirmed (silent ",
                     now - suspect->last_heartbeat_ms, " ms)");
    GoneLocked(*suspect, MemberState::kDead,
               absl::StrCat("suspect confirmed, ", why));
    ReconcileLocked();
  } else if (suspect->suspect_since_ms < 0) {
    suspect->suspect_since_ms = now;
    EventLocked("suspect", absl::StrCat("member ", suspect->name, " ", why));
  }
  FlushLocked();
  return suspect->state;
}

absl::StatusOr<bool> Membership::Leave(const std::string& worker_id,
                                       const std::string& token,
                                       const std::string& reason) {
  absl::MutexLock lock(&mu_);
  ZSHARD_ASSIGN_OR_RETURN(Member * m, SessionLocked(worker_id, token));
  const std::string why = reason.empty() ? "left" : Clip(reason);
  if (HoldsState() && !finished_ && !failed_ &&
      RankIn(stable_, m->worker_id) >= 0) {
    // It holds state of the stable epoch: hand it over first.
    if (m->state != MemberState::kDraining) {
      m->state = MemberState::kDraining;
      m->reason = absl::StrCat("leaving (", why, "), handing over its state");
      DirtyLocked(*m);
      change_reason_ = absl::StrCat("member ", m->name, " is leaving");
      EventLocked("drain", absl::StrCat(change_reason_, ": ", why,
                                        "; it hands over its state first"));
      if (proposal_ && RankIn(*proposal_, m->worker_id) >= 0) {
        AbandonLocked(change_reason_);
      }
      ReconcileLocked();
      FlushLocked();
    }
    return true;
  }
  change_reason_ = absl::StrCat("member ", m->name, " left");
  GoneLocked(*m, MemberState::kLeft, why);
  ReconcileLocked();
  ForgetGoneLocked();
  FlushLocked();
  return false;
}

absl::Status Membership::Drain(const std::string& name) {
  absl::MutexLock lock(&mu_);
  auto it = live_by_name_.find(name);
  if (it == live_by_name_.end()) {
    return absl::NotFoundError(
        absl::StrCat("worker '", name, "' is not a live member"));
  }
  Member* m = FindLocked(it->second);
  if (m->state == MemberState::kDraining) return absl::OkStatus();
  m->state = MemberState::kDraining;
  m->reason = "drained by admin";
  DirtyLocked(*m);
  change_reason_ = absl::StrCat("member ", name, " drained");
  EventLocked("drain", change_reason_);
  if (proposal_ && RankIn(*proposal_, m->worker_id) >= 0) {
    AbandonLocked(change_reason_);
  }
  ReconcileLocked();
  FlushLocked();
  return absl::OkStatus();
}

absl::StatusOr<int> Membership::SetTargetWorld(int world) {
  const job::WorldSpec& w = spec_.world;
  if (world != 0 &&
      (world < w.min || world > w.max || world % w.instances != 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("target world ", world, " must be 0 or a multiple of ",
                     w.instances, " in [", w.min, ", ", w.max, "]"));
  }
  absl::MutexLock lock(&mu_);
  target_world_ = world;
  change_reason_ = absl::StrCat("target world set to ", world);
  EventLocked("target", change_reason_);
  SaveMetaLocked();
  ReconcileLocked();
  FlushLocked();
  return world;
}

void Membership::Tick() {
  absl::MutexLock lock(&mu_);
  int64_t now = clock_->NowMs();
  for (auto& [id, m] : members_) {
    if (!IsLive(m.state)) continue;
    int64_t silent = now - m.last_heartbeat_ms;
    if (silent > spec_.lease_timeout_ms) {
      change_reason_ = absl::StrCat("member ", m.name, "'s lease expired");
      GoneLocked(m, MemberState::kDead,
                 absl::StrCat("lease expired after ", silent,
                              " ms without a heartbeat (lease ",
                              spec_.lease_timeout_ms, " ms)"));
    } else if (m.suspect_since_ms >= 0 &&
               now - m.suspect_since_ms > suspect_grace_ms_) {
      change_reason_ = absl::StrCat("member ", m.name, " suspect confirmed");
      GoneLocked(m, MemberState::kDead,
                 "suspect confirmed: no heartbeat after the report");
    }
  }
  ReconcileLocked();
  ForgetGoneLocked();
  FlushLocked();
}

void Membership::GoneLocked(Member& m, MemberState state,
                            const std::string& reason) {
  if (!IsLive(m.state)) return;
  m.state = state;
  m.reason = reason;
  m.suspect_since_ms = -1;
  auto it = live_by_name_.find(m.name);
  if (it != live_by_name_.end() && it->second == m.worker_id) {
    live_by_name_.erase(it);
  }
  DirtyLocked(m);
  EventLocked(state == MemberState::kDead ? "dead" : "leave",
              absl::StrCat("member ", m.name, ": ", reason));
  // The proposal needs it as a rank or as a source of moves.
  if (proposal_ && (RankIn(*proposal_, m.worker_id) >= 0 ||
                    RankIn(stable_, m.worker_id) >= 0)) {
    AbandonLocked(absl::StrCat("member ", m.name, ": ", reason));
  }
}

bool Membership::HealthyLocked(const Member& m) const {
  return IsLive(m.state) && m.state != MemberState::kDraining;
}

void Membership::ForgetGoneLocked() {
  // Cheap count first: this runs on every tick.
  size_t gone_count = members_.size() - live_by_name_.size();
  if (gone_count <= static_cast<size_t>(options_.max_gone_members)) return;
  std::vector<std::pair<int64_t, std::string>> gone;
  for (const auto& [id, m] : members_) {
    if (!IsLive(m.state) && RankIn(committed_, id) < 0 &&
        RankIn(stable_, id) < 0 && (!proposal_ || RankIn(*proposal_, id) < 0)) {
      gone.emplace_back(m.join_seq, id);
    }
  }
  if (gone.size() <= static_cast<size_t>(options_.max_gone_members)) return;
  std::sort(gone.begin(), gone.end());
  size_t drop = gone.size() - options_.max_gone_members;
  for (size_t i = 0; i < drop; ++i) {
    members_.erase(gone[i].second);
    dirty_.erase(gone[i].second);
    pending_write_.deleted_members.push_back(gone[i].second);
  }
}

}  // namespace zshard::server
