// CoordinatorSession: the unary calls a session makes besides join and
// heartbeat (transition acks, checkpoint reports, failure reports, leave),
// the hand-over of a leaving worker's state, and the tables of the
// session's life cycle.

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/worker/session/coordinator_session.h"
#include "common/grpc_status.h"
#include "common/logging.h"
#include "common/net/awaiting_model.h"

namespace zshard::worker {

const char* SessionStateName(SessionState state) {
  switch (state) {
    case SessionState::kNotJoined:
      return "not_joined";
    case SessionState::kMember:
      return "member";
    case SessionState::kDraining:
      return "draining";
    case SessionState::kEnded:
      return "ended";
  }
  return "unknown";
}

const char* LeaveStateName(LeaveState state) {
  switch (state) {
    case LeaveState::kStaying:
      return "staying";
    case LeaveState::kLeaving:
      return "leaving";
    case LeaveState::kLeft:
      return "left";
  }
  return "unknown";
}

const char* StopRequestName(StopRequest request) {
  switch (request) {
    case StopRequest::kNone:
      return "none";
    case StopRequest::kRequested:
      return "requested";
    case StopRequest::kHandled:
      return "handled";
  }
  return "unknown";
}

const StateTable<SessionState>& SessionStateTable() {
  using S = SessionState;
  static const StateTable<S>* const table = new StateTable<S>(
      "session state", &SessionStateName,
      {
          // The first join.
          {S::kNotJoined, S::kMember},
          // The coordinator drains this worker, or its Leave (Stop())
          // was answered with handover.
          {S::kMember, S::kDraining},
          // A rejoin (the coordinator forgot this worker) starts the new
          // incarnation as a plain member.
          {S::kDraining, S::kMember},
          // An outcome, or Stop() while between incarnations.
          {S::kMember, S::kEnded},
          {S::kDraining, S::kEnded},
          // A rejoin's reply that comes after the session ended (the
          // runner's ack was refused meanwhile) marks it alive again; Run()
          // then returns without following the job.
          {S::kEnded, S::kMember},
      });
  return *table;
}

const StateTable<LeaveState>& LeaveStateTable() {
  using L = LeaveState;
  static const StateTable<L>* const table = new StateTable<L>(
      "session leave", &LeaveStateName,
      {
          // Leave is called.
          {L::kStaying, L::kLeaving},
          // It failed, or was answered with handover: still a member.
          {L::kLeaving, L::kStaying},
          // The coordinator let this worker go.
          {L::kLeaving, L::kLeft},
      });
  return *table;
}

const StateTable<StopRequest>& StopRequestTable() {
  using R = StopRequest;
  static const StateTable<R>* const table =
      new StateTable<R>("session stop", &StopRequestName,
                        {
                            // Stop() is called.
                            {R::kNone, R::kRequested},
                            // Run() takes it.
                            {R::kRequested, R::kHandled},
                        });
  return *table;
}

void CoordinatorSession::SendAck(const TransitionAck& ack) {
  v1::AckTransitionRequest request;
  const auto [worker_id, token] = Credentials();
  request.set_worker_id(worker_id);
  request.set_token(token);
  request.set_epoch(ack.epoch);
  request.set_phase(ack.phase);
  request.set_step(ack.step);
  request.set_commit_point_passed(ack.commit_point_passed);
  if (ack.phase == v1::ACK_PHASE_PREPARED) {
    request.set_adam_step(ack.adam_step);
    request.set_commit_pending(ack.commit_pending);
    for (double v : ack.commit_values) request.add_commit_values(v);
  }
  v1::AckTransitionResponse response;
  grpc::Status status =
      CallLeader([&](v1::WorkerService::Stub& stub, grpc::ClientContext* c) {
        return stub.AckTransition(c, request, &response);
      });
  if (status.error_code() == grpc::StatusCode::UNAUTHENTICATED) {
    return End(SessionOutcome::kFenced,
               "ack refused: " + status.error_message());
  }
  // Other failures (a stale epoch, the coordinator away) need no retry
  // here: the watch stream replays the current state on reconnect and the
  // ack is sent again.
  if (!status.ok()) {
    ZSHARD_LOG_WARN("transition ack failed",
                    {{"epoch", absl::StrCat(ack.epoch)},
                     {"error", status.error_message()}});
  }
}

void CoordinatorSession::OnEpochReady(int64_t epoch) {
  std::shared_ptr<TransitionHandler> handler = this->handler();
  if (handler == nullptr) return;
  std::optional<TransitionAck> ack = handler->EpochReady(epoch);
  if (ack.has_value()) SendAck(*ack);
}

absl::Status CoordinatorSession::ReportCheckpoint(
    int64_t epoch, int64_t step, int64_t adam_step, const std::string& dir,
    const checkpoint::RankFileInfo& file) {
  v1::ReportCheckpointRequest request;
  const auto [worker_id, token] = Credentials();
  request.set_worker_id(worker_id);
  request.set_token(token);
  request.set_epoch(epoch);
  request.set_step(step);
  request.set_adam_step(adam_step);
  request.set_dir(dir);
  v1::CheckpointFile* out = request.mutable_file();
  out->set_path(file.path);
  out->set_rank(file.rank);
  out->set_bytes(file.bytes);
  out->set_checksum(file.checksum);
  for (const plan::CheckpointFragment& r : file.ranges) {
    v1::ParamRange* range = out->add_ranges();
    range->set_param_index(r.param_index);
    range->set_expert_rank(r.expert_rank);
    range->set_begin(r.begin);
    range->set_end(r.end);
  }
  v1::ReportCheckpointResponse response;
  grpc::Status status = CallLeaderThroughElection(
      [&](v1::WorkerService::Stub& stub, grpc::ClientContext* c) {
        return stub.ReportCheckpoint(c, request, &response);
      });
  if (!status.ok()) return FromGrpcStatus(status);
  if (response.manifest_committed()) {
    ZSHARD_LOG_INFO("checkpoint committed",
                    {{"step", absl::StrCat(step)}, {"dir", dir}});
  }
  return absl::OkStatus();
}

void CoordinatorSession::ReportFailure(const RunnerFailure& failure) {
  const auto [worker_id, token] = Credentials();
  grpc::Status status;
  if (failure.kind == RunnerFailure::Kind::kCheckpointWrite) {
    v1::ReportCheckpointRequest request;
    request.set_worker_id(worker_id);
    request.set_token(token);
    request.set_epoch(failure.epoch);
    request.set_step(failure.step);
    request.set_dir(failure.dir);
    request.mutable_file()->set_rank(failure.rank);
    request.set_error(failure.error);
    v1::ReportCheckpointResponse response;
    status = CallLeaderThroughElection(
        [&](v1::WorkerService::Stub& stub, grpc::ClientContext* c) {
          return stub.ReportCheckpoint(c, request, &response);
        });
  } else if (failure.kind == RunnerFailure::Kind::kEvent) {
    v1::ReportEventRequest request;
    request.set_worker_id(worker_id);
    request.set_token(token);
    request.set_kind(failure.event_kind);
    request.set_reason(failure.error);
    v1::ReportEventResponse response;
    status = CallLeaderThroughElection(
        [&](v1::WorkerService::Stub& stub, grpc::ClientContext* c) {
          return stub.ReportEvent(c, request, &response);
        });
  } else {
    v1::AckTransitionRequest request;
    request.set_worker_id(worker_id);
    request.set_token(token);
    request.set_epoch(failure.epoch);
    request.set_phase(v1::ACK_PHASE_FAILED);
    if (failure.kind == RunnerFailure::Kind::kStep) {
      request.set_step(failure.step);
    }
    request.set_error(failure.error);
    request.set_failed_source(failure.source);
    request.set_source_is_checkpoint(failure.source_is_checkpoint);
    if (failure.peer_rank >= 0) {
      request.set_peer_rank(failure.peer_rank);
      request.set_peer_group(failure.peer_group);
      request.set_peer_closed(failure.peer_closed);
      if (failure.peer_closed) ReportClosedPeer(failure);
    }
    v1::AckTransitionResponse response;
    status = CallLeaderThroughElection(
        [&](v1::WorkerService::Stub& stub, grpc::ClientContext* c) {
          return stub.AckTransition(c, request, &response);
        });
  }
  if (!status.ok()) {
    ZSHARD_LOG_WARN("failure report not delivered",
                    {{"epoch", absl::StrCat(failure.epoch)},
                     {"failure", failure.error},
                     {"error", status.error_message()}});
  }
}

void CoordinatorSession::ReportClosedPeer(const RunnerFailure& failure) {
  {
    absl::MutexLock lock(&mu_);
    if (!suspects_reported_.emplace(failure.epoch, failure.peer_rank).second) {
      return;
    }
  }
  const auto [worker_id, token] = Credentials();
  v1::ReportSuspectRequest request;
  request.set_worker_id(worker_id);
  request.set_token(token);
  request.set_epoch(failure.epoch);
  request.set_suspect_rank(failure.peer_rank);
  request.set_reason(failure.error);
  request.set_collective_failed(true);
  v1::ReportSuspectResponse response;
  const grpc::Status status =
      CallLeader([&](v1::WorkerService::Stub& stub, grpc::ClientContext* c) {
        return stub.ReportSuspect(c, request, &response);
      });
  if (!status.ok()) {
    ZSHARD_LOG_WARN("suspect report not delivered",
                    {{"epoch", absl::StrCat(failure.epoch)},
                     {"rank", absl::StrCat(failure.peer_rank)},
                     {"error", status.error_message()}});
  }
}

bool CoordinatorSession::Leave(const std::string& reason) {
  v1::LeaveRequest request;
  const auto [worker_id, token] = Credentials();
  request.set_worker_id(worker_id);
  request.set_token(token);
  request.set_reason(reason);
  v1::LeaveResponse response;
  {
    absl::MutexLock lock(&mu_);
    // After an accepted Leave (Run's last Leave once the steps are done)
    // this one changes nothing.
    if (leave_ == LeaveState::kStaying) SetLeaveLocked(LeaveState::kLeaving);
  }
  grpc::Status status =
      CallLeader([&](v1::WorkerService::Stub& stub, grpc::ClientContext* c) {
        return stub.Leave(c, request, &response);
      });
  if (!status.ok() || response.handover()) {
    // Still a member: refusals from now on are real fences again.
    absl::MutexLock lock(&mu_);
    if (leave_ == LeaveState::kLeaving) SetLeaveLocked(LeaveState::kStaying);
  }
  if (!status.ok()) {
    ZSHARD_LOG_WARN("leave failed", {{"error", status.error_message()}});
    return false;
  }
  if (response.handover()) {
    ZSHARD_LOG_INFO("leaving after the state is handed over",
                    {{"reason", reason}});
    return true;
  }
  absl::MutexLock lock(&mu_);
  SetLeaveLocked(LeaveState::kLeft);
  ZSHARD_LOG_INFO("left the job", {{"reason", reason}});
  return false;
}

void CoordinatorSession::HandleStop() {
  if (!Leave("stopped by signal")) {
    return End(SessionOutcome::kStopped, "stopped by signal");
  }
  const int64_t stable = handler()->stable_epoch();
  absl::MutexLock lock(&mu_);
  StartDrainLocked(stable);
}

bool CoordinatorSession::StartDrainLocked(int64_t stable) {
  // Nothing reads a drain once the session ended (End is a no-op then).
  if (state_ != SessionState::kMember) return false;
  SetStateLocked(SessionState::kDraining);
  drain_since_epoch_ = stable;
  return true;
}

void CoordinatorSession::CheckHandover() {
  std::shared_ptr<TransitionHandler> handler = this->handler();
  if (handler == nullptr) return;
  // Read the handler before mu_ (see epoch()).
  const int64_t stable = handler->stable_epoch();
  const int rank = handler->stable_rank();
  {
    absl::MutexLock lock(&mu_);
    if (state_ != SessionState::kDraining || stable <= drain_since_epoch_ ||
        rank >= 0) {
      return;
    }
  }
  End(SessionOutcome::kDrained, "state handed over");
}

absl::Status CoordinatorSession::GiveTrainerModel(
    const grpc::ClientContext& awaiting) {
  const auto& trailers = awaiting.GetServerTrailingMetadata();
  auto it = trailers.find(net::kAwaitingModelMetadataKey);
  const std::string job =
      it == trailers.end() ? ""
                           : std::string(it->second.data(), it->second.size());
  // A slice at a time, so that a model another worker gave (the join then
  // succeeds) or a Stop() is seen within a second.
  absl::StatusOr<std::string> model = intake_.WaitForModel(job, 1000);
  if (!model.ok()) {
    switch (model.status().code()) {
      case absl::StatusCode::kDeadlineExceeded:
        return absl::OkStatus();
      case absl::StatusCode::kFailedPrecondition:  // no trainer socket
        SleepUnlessEnded(500);
        return absl::OkStatus();
      case absl::StatusCode::kCancelled:
        return absl::OkStatus();
      default:
        return model.status();
    }
  }
  v1::ProvideModelRequest request;
  request.set_name(options_.name);
  request.set_model_json(*model);
  v1::ProvideModelResponse response;
  grpc::Status status =
      CallLeader([&](v1::WorkerService::Stub& stub, grpc::ClientContext* c) {
        return stub.ProvideModel(c, request, &response);
      });
  if (status.ok()) {
    ZSHARD_LOG_INFO(absl::StrCat("gave job '", job,
                                 "' its model, from this worker's trainer"));
    return absl::OkStatus();
  }
  if (status.error_code() == grpc::StatusCode::INVALID_ARGUMENT) {
    // The model cannot run this job: nothing will change that.
    return FromGrpcStatus(status);
  }
  // Another trainer's model was taken first (this trainer is refused once
  // the join succeeds), or the coordinator is away: join again.
  if (status.error_code() != grpc::StatusCode::FAILED_PRECONDITION) {
    SleepUnlessEnded(200);
  }
  return absl::OkStatus();
}

}  // namespace zshard::worker
