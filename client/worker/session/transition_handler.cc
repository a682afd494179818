// TransitionHandler: the worker's side of the two-phase transition and of
// the STABLE phase that follows it.

#include "client/worker/session/transition_handler.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace zshard::worker {
namespace {

const v1::Assignment* FindAssignment(const v1::PlanUpdate& update,
                                     const std::string& worker_id) {
  for (const v1::Assignment& a : update.assignments()) {
    if (a.worker_id() == worker_id) return &a;
  }
  return nullptr;
}

// The wire forms of a move and an assignment, converted once here so that
// the runner, the mover and the engine see the planner's types only.
plan::Assignment ToAssignment(const v1::Assignment& a) {
  plan::Assignment out;
  out.worker_id = a.worker_id();
  out.name = a.name();
  out.address = a.address();
  out.rank = a.rank();
  out.instance = a.instance();
  out.shard_rank = a.shard_rank();
  out.labels.insert(a.labels().begin(), a.labels().end());
  return out;
}

// A checkpoint source (no sender) names its file through `fragment`, an
// index into `files`, which lists each file once in order of first use.
plan::Move ToMove(const v1::Move& m, std::vector<std::string>& files) {
  plan::Move out;
  out.index = m.index();
  out.source = m.from_worker_id().empty() ? plan::MoveSource::kCheckpoint
                                          : plan::MoveSource::kMember;
  out.source_member = m.from_worker_id();
  out.source_rank = m.from_rank();
  if (out.source == plan::MoveSource::kCheckpoint) {
    auto it = std::find(files.begin(), files.end(), m.checkpoint_file());
    out.fragment = static_cast<int>(it - files.begin());
    if (it == files.end()) files.push_back(m.checkpoint_file());
  }
  out.dest_member = m.to_worker_id();
  out.dest_rank = m.to_rank();
  out.dest_buffer = m.buffer();
  out.dest_bucket = m.bucket();
  out.dest_offset_in_bucket = m.offset();
  out.param_index = m.param_index();
  out.expert_rank = m.expert_rank();
  out.begin = m.begin();
  out.end = m.end();
  return out;
}

}  // namespace

const char* EpochPhaseName(EpochPhase phase) {
  switch (phase) {
    case EpochPhase::kPreparing:
      return "preparing";
    case EpochPhase::kReady:
      return "ready";
    case EpochPhase::kStableUnready:
      return "stable_unready";
    case EpochPhase::kStable:
      return "stable";
  }
  return "unknown";
}

const StateTable<EpochPhase>& EpochPhaseTable() {
  using P = EpochPhase;
  static const StateTable<P>* const table = new StateTable<P>(
      "epoch phase", &EpochPhaseName,
      {
          // The runner is ready.
          {P::kPreparing, P::kReady},
          {P::kStableUnready, P::kStable},
          // STABLE (or a proposal that implies it).
          {P::kReady, P::kStable},
          // STABLE reaches a worker without a rank still preparing.
          {P::kPreparing, P::kStableUnready},
          // A later epoch is committed, or is stable before this worker
          // saw it committed.
          {P::kReady, P::kPreparing},
          {P::kStableUnready, P::kPreparing},
          {P::kStable, P::kPreparing},
          {P::kPreparing, P::kStable},
      });
  return *table;
}

TransitionHandler::TransitionHandler(std::string worker_id, Runner* runner)
    : worker_id_(std::move(worker_id)), runner_(runner) {}

int64_t TransitionHandler::epoch() const { return seen_epoch_.load(); }

int TransitionHandler::rank() const { return seen_rank_.load(); }

int64_t TransitionHandler::stable_epoch() const {
  return seen_stable_epoch_.load();
}

int TransitionHandler::stable_rank() const { return seen_stable_rank_.load(); }

void TransitionHandler::SetPhaseLocked(EpochPhase to) {
  EpochPhaseTable().Advance(phase_, to);
}

bool TransitionHandler::ReadyLocked() const {
  return phase_ == EpochPhase::kReady || phase_ == EpochPhase::kStable;
}

void TransitionHandler::PublishLocked() {
  seen_epoch_.store(committed_epoch_);
  seen_rank_.store(rank_);
  seen_stable_epoch_.store(stable_epoch_);
  seen_stable_rank_.store(stable_rank_);
}

std::optional<TransitionAck> TransitionHandler::Apply(
    const v1::PlanUpdate& update) {
  absl::MutexLock lock(&mu_);
  const v1::Assignment* mine = FindAssignment(update, worker_id_);
  switch (update.phase()) {
    case v1::PLAN_PHASE_PROPOSED:
      return Proposed(update, mine);
    case v1::PLAN_PHASE_COMMITTED: {
      std::optional<TransitionAck> ack = Committed(update, mine);
      PublishLocked();
      return ack;
    }
    case v1::PLAN_PHASE_STABLE:
      Stable(update);
      PublishLocked();
      return std::nullopt;
    case v1::PLAN_PHASE_ABANDONED: {
      const int64_t epoch = update.epoch();
      if (epoch <= committed_epoch_) return std::nullopt;
      // A later proposal already stopped this worker: resuming for an
      // older abandonment (a replay) would step where peers do not.
      if (pending_epoch_ > epoch) return std::nullopt;
      pending_epoch_ = 0;
      if (rank_ >= 0 && ReadyLocked()) {
        runner_->Activate(runner_->step());
      }
      ZSHARD_LOG_INFO("epoch abandoned", {{"epoch", absl::StrCat(epoch)},
                                          {"reason", update.reason()}});
      return std::nullopt;
    }
    default:
      return std::nullopt;
  }
}

std::optional<TransitionAck> TransitionHandler::Proposed(
    const v1::PlanUpdate& update, const v1::Assignment* mine) {
  const int64_t epoch = update.epoch();
  if (epoch <= committed_epoch_) return std::nullopt;
  const int64_t base = update.base_epoch();
  if (base > 0 && base == committed_epoch_ && stable_epoch_ < base &&
      ReadyLocked()) {
    // The base epoch became stable while this worker missed the update: a
    // peer may already step in it. Apply it first, so that this rank meets
    // that peer at the common stop step instead of leaving it blocked.
    SetPhaseLocked(EpochPhase::kStable);
    stable_epoch_ = base;
    stable_rank_ = rank_;
    ZSHARD_LOG_INFO(
        "epoch stable (implied by the proposal)",
        {{"epoch", absl::StrCat(base)}, {"rank", absl::StrCat(rank_)}});
    runner_->OnEpochStable(base);
    PublishLocked();
  }
  // Members and non-members alike stop: nobody steps into an epoch that is
  // not committed, and a worker left out of it must not go on alone.
  runner_->Pause();
  runner_->OnProposed(epoch, update.base_epoch());
  // A worker that holds a rank in the base epoch is a source of moves even
  // when the new epoch leaves it out.
  const bool holds_base =
      base > 0 && ((base == stable_epoch_ && stable_rank_ >= 0) ||
                   (base == committed_epoch_ && rank_ >= 0));
  if (mine == nullptr && !holds_base) return std::nullopt;
  const PreparedState state = runner_->prepared_state();
  if (pending_epoch_ != epoch) {
    ZSHARD_LOG_INFO(
        "prepared for epoch",
        {{"epoch", absl::StrCat(epoch)},
         {"base_epoch", absl::StrCat(base)},
         {"step", absl::StrCat(state.step)},
         {"adam_step", absl::StrCat(state.adam_step)},
         {"commit_pending", state.commit_pending ? "true" : "false"}});
  }
  pending_epoch_ = epoch;
  TransitionAck ack;
  ack.epoch = epoch;
  ack.phase = v1::ACK_PHASE_PREPARED;
  ack.step = state.step;
  // The state is always at a finished step: a pending commit is reported
  // apart (commit_pending), never as a step half done.
  ack.commit_point_passed = true;
  ack.adam_step = state.adam_step;
  ack.commit_pending = state.commit_pending;
  ack.commit_values = state.commit_values;
  return ack;
}

EpochInfo TransitionHandler::MakeEpochInfo(const v1::PlanUpdate& update,
                                           const v1::Assignment* mine) const {
  EpochInfo info;
  info.epoch = update.epoch();
  info.rank = mine != nullptr ? mine->rank() : -1;
  info.world = update.world();
  info.instances = update.instances();
  info.plan_hash = update.plan_hash();
  info.resume_step = update.resume_step();
  info.worker_id = worker_id_;
  if (mine != nullptr && mine->rank() >= 0) {
    info.instance = mine->instance();
    info.shard_rank = mine->shard_rank();
  }
  info.base_epoch = update.base_epoch();
  info.resume_adam_step = update.resume_adam_step();
  info.repeat_through = update.repeat_through();
  for (const v1::Move& m : update.moves()) {
    info.moves.push_back(ToMove(m, info.checkpoint_files));
  }
  info.restore = update.has_restore() && !update.restore().dir().empty();
  if (info.restore) info.restore_dir = update.restore().dir();
  info.finish_pending_step = update.finish_pending_step();
  info.commit_values.assign(update.commit_values().begin(),
                            update.commit_values().end());
  for (const v1::Assignment& a : update.assignments()) {
    info.assignments.push_back(ToAssignment(a));
  }
  return info;
}

TransitionAck TransitionHandler::ActiveAck(int64_t step) const {
  TransitionAck ack;
  ack.epoch = committed_epoch_;
  ack.phase = v1::ACK_PHASE_ACTIVE;
  ack.step = step;
  return ack;
}

std::optional<TransitionAck> TransitionHandler::Committed(
    const v1::PlanUpdate& update, const v1::Assignment* mine) {
  const int64_t epoch = update.epoch();
  if (epoch < committed_epoch_) return std::nullopt;
  if (epoch == committed_epoch_) {
    // A replay (reconnect, coordinator restart): the epoch is being
    // prepared or is done; never prepare it twice. Keep our own step, but
    // resume if a later proposal stopped us and was lost.
    pending_epoch_ = 0;
    if (!ReadyLocked()) return std::nullopt;
    if (rank_ >= 0 && !runner_->active()) {
      runner_->Activate(runner_->step());
    }
    if (!listed_) return std::nullopt;
    return ActiveAck(runner_->step());
  }
  const int rank = mine != nullptr ? mine->rank() : -1;
  committed_epoch_ = epoch;
  rank_ = rank;
  listed_ = mine != nullptr;
  resume_step_ = update.resume_step();
  pending_epoch_ = 0;
  SetPhaseLocked(EpochPhase::kPreparing);
  ZSHARD_LOG_INFO(
      "epoch committed",
      {{"epoch", absl::StrCat(epoch)},
       {"base_epoch", absl::StrCat(update.base_epoch())},
       {"rank", absl::StrCat(rank)},
       {"world", absl::StrCat(update.world())},
       {"resume_step", absl::StrCat(update.resume_step())},
       {"moves", absl::StrCat(update.moves_size())},
       {"restore", update.has_restore() ? update.restore().dir() : ""}});
  const EpochStart start =
      runner_->OnEpochCommitted(MakeEpochInfo(update, mine));
  if (start == EpochStart::kPending) return std::nullopt;
  SetPhaseLocked(EpochPhase::kReady);
  if (rank >= 0) {
    runner_->Activate(update.resume_step());
  } else {
    runner_->Pause();
  }
  if (!listed_) return std::nullopt;
  return ActiveAck(runner_->step());
}

void TransitionHandler::Stable(const v1::PlanUpdate& update) {
  const int64_t epoch = update.epoch();
  if (epoch < stable_epoch_) return;
  if (epoch > committed_epoch_) {
    // An epoch this worker never saw committed (it joined later, or the
    // commit was missed while away): it holds nothing in it; record it so
    // that later proposals name a known base.
    committed_epoch_ = epoch;
    rank_ = -1;
    listed_ = false;
    SetPhaseLocked(EpochPhase::kStable);
    stable_epoch_ = epoch;
    stable_rank_ = -1;
    if (pending_epoch_ <= epoch) pending_epoch_ = 0;
    SetLogContext("epoch", absl::StrCat(epoch));
    ClearLogContext("rank");
    runner_->OnEpochStable(epoch);
    return;
  }
  if (epoch < committed_epoch_) return;  // a later epoch is committed
  if (!ReadyLocked()) {
    // Every rank acked ACTIVE, this worker included when it has a rank: a
    // worker that is still preparing it only sent state.
    if (rank_ >= 0) return;
  }
  if (stable_epoch_ != epoch) {
    SetPhaseLocked(ReadyLocked() ? EpochPhase::kStable
                                 : EpochPhase::kStableUnready);
    stable_epoch_ = epoch;
    stable_rank_ = rank_;
    ZSHARD_LOG_INFO("epoch stable", {{"epoch", absl::StrCat(epoch)},
                                     {"rank", absl::StrCat(rank_)}});
    // Later lines of this worker name the epoch it steps in and its rank.
    SetLogContext("epoch", absl::StrCat(epoch));
    if (rank_ >= 0) {
      SetLogContext("rank", absl::StrCat(rank_));
    } else {
      ClearLogContext("rank");
    }
    runner_->OnEpochStable(epoch);
  }
  if (rank_ >= 0 && pending_epoch_ == 0 && !runner_->active()) {
    runner_->Activate(runner_->step());
  }
}

std::optional<TransitionAck> TransitionHandler::EpochReady(int64_t epoch) {
  absl::MutexLock lock(&mu_);
  if (epoch != committed_epoch_ || pending_epoch_ > epoch) return std::nullopt;
  if (phase_ == EpochPhase::kPreparing) {
    SetPhaseLocked(EpochPhase::kReady);
  } else if (phase_ == EpochPhase::kStableUnready) {
    SetPhaseLocked(EpochPhase::kStable);
  }
  ZSHARD_LOG_INFO("epoch ready", {{"epoch", absl::StrCat(epoch)},
                                  {"rank", absl::StrCat(rank_)}});
  if (!listed_) return std::nullopt;
  return ActiveAck(resume_step_);
}

}  // namespace zshard::worker
