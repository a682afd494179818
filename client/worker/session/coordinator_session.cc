// CoordinatorSession: the join / heartbeat / watch threads and how each
// RPC outcome moves the session.

#include "client/worker/session/coordinator_session.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/worker/runner/idle_runner.h"
#include "client/worker/runner/workload_config.h"
#include "client/worker/session/backoff.h"
#include "common/clock.h"
#include "common/grpc_status.h"
#include "common/job/job_spec.h"
#include "common/logging.h"
#include "common/net/awaiting_model.h"
#include "common/status.h"

namespace zshard::worker {
namespace {

// The coordinator is away (down, restarting, partitioned): retry.
bool IsTransient(grpc::StatusCode code) {
  return code == grpc::StatusCode::UNAVAILABLE ||
         code == grpc::StatusCode::DEADLINE_EXCEEDED ||
         code == grpc::StatusCode::CANCELLED ||
         code == grpc::StatusCode::RESOURCE_EXHAUSTED ||
         code == grpc::StatusCode::UNKNOWN ||
         code == grpc::StatusCode::INTERNAL;
}

}  // namespace

CoordinatorSession::CoordinatorSession(
    const Options& options, std::shared_ptr<net::LeaderFollower> coordinators)
    : options_(options),
      coordinators_(std::move(coordinators)),
      intake_(options.train.trainer_socket) {}

CoordinatorSession::~CoordinatorSession() = default;

std::unique_ptr<grpc::ClientContext> CoordinatorSession::MakeContext() const {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() +
                        std::chrono::milliseconds(options_.rpc_timeout_ms));
  // With one coordinator, wait for the connection instead of failing at
  // once while it is away: a waiting call keeps gRPC polling the
  // reconnect, so the session notices the coordinator's return within the
  // reconnect backoff rather than at gRPC's 5 s backup poll. With several,
  // a dead one must fail fast so that the next is tried.
  context->set_wait_for_ready(coordinators_->size() == 1);
  return context;
}

net::LeaderFollower::Move CoordinatorSession::Follow(
    const net::LeaderFollower::Pick& used, const grpc::Status& status,
    const grpc::ClientContext& context) {
  const net::LeaderFollower::Move move = coordinators_->OnFailure(
      used, status, context, /*deadline_is_unreachable=*/true);
  RedirectWatch();
  return move;
}

grpc::Status CoordinatorSession::CallLeader(
    const std::function<grpc::Status(v1::WorkerService::Stub&,
                                     grpc::ClientContext*)>& call) {
  net::FollowOptions follow;
  follow.deadline_is_unreachable = true;
  grpc::Status status = net::CallOnLeader(
      *coordinators_, [this] { return MakeContext(); },
      [&call](const std::shared_ptr<grpc::Channel>& channel,
              grpc::ClientContext* context) {
        return call(*v1::WorkerService::NewStub(channel), context);
      },
      follow);
  RedirectWatch();
  return status;
}

grpc::Status CoordinatorSession::CallLeaderThroughElection(
    const std::function<grpc::Status(v1::WorkerService::Stub&,
                                     grpc::ClientContext*)>& call) {
  return net::RetryThroughElection(
      *coordinators_, absl::Milliseconds(options_.election_wait_ms),
      [&] { return CallLeader(call); });
}

void CoordinatorSession::RedirectWatch() {
  const uint64_t generation = coordinators_->Current().generation;
  absl::MutexLock lock(&mu_);
  if (watch_context_ != nullptr && watch_generation_ != generation) {
    watch_context_->TryCancel();
  }
}

void CoordinatorSession::SetStateLocked(SessionState to) {
  SessionStateTable().Advance(state_, to);
}

void CoordinatorSession::SetLeaveLocked(LeaveState to) {
  LeaveStateTable().Advance(leave_, to);
}

void CoordinatorSession::SetStopLocked(StopRequest to) {
  StopRequestTable().Advance(stop_, to);
}

void CoordinatorSession::Stop() {
  absl::MutexLock lock(&mu_);
  // A second Stop() changes nothing.
  if (stop_ == StopRequest::kNone) SetStopLocked(StopRequest::kRequested);
  // Not joined yet (or between incarnations): nothing to hand over. Once
  // joined, Run() calls Leave and decides (HandleStop).
  if (handler_ == nullptr || ending_.has_value()) {
    // Not alive from now on (before the first join it is not alive yet).
    if (handler_ != nullptr) SetStateLocked(SessionState::kEnded);
    if (!ending_.has_value()) ending_ = Ending{SessionOutcome::kStopped};
    if (watch_context_ != nullptr) watch_context_->TryCancel();
  }
}

void CoordinatorSession::End(std::optional<SessionOutcome> outcome,
                             const std::string& why) {
  absl::MutexLock lock(&mu_);
  if (ending_.has_value()) return;
  // Once this worker asked to leave, the coordinator refusing its session
  // (a heartbeat or the plan watch answered before the Leave's own reply)
  // or forgetting it is that leave taking effect, not a fence.
  if (leave_ != LeaveState::kStaying &&
      (!outcome.has_value() || *outcome == SessionOutcome::kFenced)) {
    outcome = SessionOutcome::kStopped;
  }
  ZSHARD_LOG_INFO("session ending", {{"reason", why}});
  ending_ = Ending{outcome};
  if (outcome.has_value()) SetStateLocked(SessionState::kEnded);
  if (watch_context_ != nullptr) watch_context_->TryCancel();
}

bool CoordinatorSession::SleepUnlessEnded(int64_t ms) {
  absl::MutexLock lock(&mu_);
  auto ended = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return ending_.has_value();
  };
  return mu_.AwaitWithTimeout(absl::Condition(&ended), absl::Milliseconds(ms));
}

int64_t CoordinatorSession::epoch() const {
  // Never call the handler under mu_: it may wait for the runner, whose
  // thread may wait for mu_ (credentials).
  std::shared_ptr<TransitionHandler> handler = this->handler();
  return handler != nullptr ? handler->epoch() : 0;
}

int64_t CoordinatorSession::step() const {
  absl::MutexLock lock(&mu_);
  return runner_ != nullptr ? runner_->step() : 0;
}

bool CoordinatorSession::alive() const {
  absl::MutexLock lock(&mu_);
  return state_ == SessionState::kMember || state_ == SessionState::kDraining;
}

std::string CoordinatorSession::worker_id() const {
  absl::MutexLock lock(&mu_);
  return worker_id_;
}

std::string CoordinatorSession::failure_reason() const {
  absl::MutexLock lock(&mu_);
  return failure_reason_;
}

std::shared_ptr<TransitionHandler> CoordinatorSession::handler() const {
  absl::MutexLock lock(&mu_);
  return handler_;
}

std::pair<std::string, std::string> CoordinatorSession::Credentials() const {
  absl::MutexLock lock(&mu_);
  return {worker_id_, token_};
}

std::unique_ptr<CoordinatorKvStore> CoordinatorSession::NewKvStore(
    int64_t epoch) const {
  CoordinatorKvStore::Options options;
  {
    absl::MutexLock lock(&mu_);
    options.worker_id = worker_id_;
    options.token = token_;
  }
  options.epoch = epoch;
  options.election_wait_ms = options_.election_wait_ms;
  return std::make_unique<CoordinatorKvStore>(options, coordinators_);
}

absl::Status CoordinatorSession::Join() {
  v1::JoinRequest request;
  request.set_name(options_.name);
  request.set_address(options_.address);
  for (const auto& [key, value] : options_.labels) {
    (*request.mutable_labels())[key] = value;
  }
  request.mutable_device()->set_kind(options_.device);
  request.mutable_device()->set_count(1);
  Backoff backoff(options_.min_backoff_ms, options_.max_backoff_ms);
  bool warned = false;
  bool redirected = false;
  while (true) {
    v1::JoinResponse response;
    const net::LeaderFollower::Pick pick = coordinators_->Current();
    auto context = MakeContext();
    grpc::Status status = v1::WorkerService::NewStub(pick.channel)
                              ->Join(context.get(), request, &response);
    if (status.ok()) {
      ZSHARD_ASSIGN_OR_RETURN(WorkloadConfig config,
                              ParseWorkloadConfig(response.job_spec_json()));
      // On a rejoin, stop the runner before taking mu_: a training step
      // in progress needs mu_ (credentials, rendezvous store) to finish.
      if (runner_ != nullptr) runner_->Pause();
      absl::MutexLock lock(&mu_);
      if (runner_ == nullptr && config.kind == "idle") {
        IdleRunner::Options runner_options;
        runner_options.steps = config.steps;
        runner_options.step_delay_ms = config.step_delay_ms;
        runner_ = std::make_unique<IdleRunner>(runner_options);
      } else if (runner_ == nullptr) {
        ZSHARD_ASSIGN_OR_RETURN(job::JobSpec job,
                                job::ParseJobSpec(response.job_spec_json()));
        telemetry_ = std::make_unique<TelemetryStream>(coordinators_, [this] {
          absl::MutexLock credentials_lock(&mu_);
          return TelemetryStream::Credentials{worker_id_, token_};
        });
        Runner::Callbacks callbacks;
        callbacks.ready = [this](int64_t epoch) { OnEpochReady(epoch); };
        callbacks.report_checkpoint =
            [this](int64_t epoch, int64_t step, int64_t adam_step,
                   const std::string& dir,
                   const checkpoint::RankFileInfo& file) {
              return ReportCheckpoint(epoch, step, adam_step, dir, file);
            };
        callbacks.report_failure = [this](const RunnerFailure& failure) {
          ReportFailure(failure);
        };
        callbacks.leave = [this](const std::string& why) {
          ZSHARD_LOG_WARN("leaving the job", {{"reason", why}});
          Stop();
        };
        TrainRunner::Options train = options_.train;
        train.trainer_hub = intake_.hub();
        runner_ = std::make_unique<TrainRunner>(
            train, std::move(job),
            [this](int64_t epoch) -> std::unique_ptr<comm::KvStore> {
              return NewKvStore(epoch);
            },
            [stream = telemetry_.get()](int64_t epoch,
                                        const engine::StepTelemetry& t) {
              stream->Send(epoch, t);
            },
            std::move(callbacks));
      }
      // A runner kept from an earlier incarnation was paused above,
      // outside mu_ (its thread may need mu_ for credentials).
      worker_id_ = response.worker_id();
      token_ = response.token();
      heartbeat_interval_ms_ =
          std::max<int64_t>(10, response.heartbeat_interval_ms() > 0
                                    ? response.heartbeat_interval_ms()
                                    : 1000);
      lease_timeout_ms_ = response.lease_timeout_ms() > 0
                              ? response.lease_timeout_ms()
                              : 5 * heartbeat_interval_ms_;
      handler_ = std::make_shared<TransitionHandler>(worker_id_, runner_.get());
      // Alive again, and a new incarnation starts as a plain member. A join
      // follows no Leave and no handled Stop(): both come only once Stop()
      // was called (then Run() joins no more) or as Run() returns.
      SetStateLocked(SessionState::kMember);
      SetLogContext({{"job", response.job_name()},
                     {"worker", options_.name},
                     {"worker_id", worker_id_}});
      ZSHARD_LOG_INFO("joined", {{"epoch", absl::StrCat(response.epoch())},
                                 {"heartbeat_interval_ms",
                                  absl::StrCat(heartbeat_interval_ms_)}});
      return absl::OkStatus();
    }
    if (status.error_code() == grpc::StatusCode::FAILED_PRECONDITION &&
        context->GetServerTrailingMetadata().count(
            net::kAwaitingModelMetadataKey) > 0) {
      ZSHARD_RETURN_IF_ERROR(GiveTrainerModel(*context));
      if (SleepUnlessEnded(0)) return absl::OkStatus();
      continue;
    }
    if (!IsTransient(status.error_code())) return FromGrpcStatus(status);
    // A standby named the leader: ask it at once (once in a row, so two
    // standbys naming each other cannot spin).
    if (Follow(pick, status, *context) ==
            net::LeaderFollower::Move::kToLeader &&
        !redirected) {
      redirected = true;
      continue;
    }
    redirected = false;
    if (!warned) {
      ZSHARD_LOG_WARN("coordinator unreachable, retrying join",
                      {{"error", status.error_message()}});
      warned = true;
    }
    if (SleepUnlessEnded(backoff.NextMs())) return absl::OkStatus();
  }
}

absl::StatusOr<SessionOutcome> CoordinatorSession::Run() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (stop_ != StopRequest::kNone) return SessionOutcome::kStopped;
      ending_.reset();
    }
    absl::Status joined = Join();
    if (!joined.ok()) return joined;
    {
      absl::MutexLock lock(&mu_);
      // Stopped while the coordinator was still unreachable.
      if (handler_ == nullptr ||
          (stop_ != StopRequest::kNone && ending_.has_value())) {
        return SessionOutcome::kStopped;
      }
    }
    std::thread heartbeat([this] { HeartbeatLoop(); });
    std::thread watch([this] { WatchLoop(); });
    std::optional<SessionOutcome> outcome;
    while (true) {
      {
        absl::MutexLock lock(&mu_);
        auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return ending_.has_value() || stop_ == StopRequest::kRequested;
        };
        mu_.Await(absl::Condition(&woken));
        if (ending_.has_value()) {
          outcome = ending_->outcome;
          break;
        }
        SetStopLocked(StopRequest::kHandled);
      }
      HandleStop();
    }
    heartbeat.join();
    watch.join();
    if (!outcome.has_value()) continue;  // Forgotten by the coordinator.
    // A graceful end stops the steps first. A fenced or failed worker does
    // not wait: its work may be blocked on peers that are gone.
    if (*outcome != SessionOutcome::kFenced &&
        *outcome != SessionOutcome::kFailed) {
      runner_->Pause();
    }
    bool left = false;
    {
      absl::MutexLock lock(&mu_);
      left = leave_ == LeaveState::kLeft;
    }
    switch (*outcome) {
      case SessionOutcome::kStopped:
        if (!left) Leave("stopped by signal");
        break;
      case SessionOutcome::kDrained:
        if (!left) Leave("drained");
        break;
      case SessionOutcome::kDone:
        Leave("steps done");
        break;
      case SessionOutcome::kFailed: {
        std::string reason;
        {
          absl::MutexLock lock(&mu_);
          reason = failure_reason_;
        }
        Leave("failed: " + reason);
        break;
      }
      case SessionOutcome::kFenced:
        break;
    }
    if (telemetry_ != nullptr) telemetry_->Close();
    return *outcome;
  }
}

void CoordinatorSession::HeartbeatLoop() {
  bool reachable = true;
  std::optional<int64_t> done_since_ms;
  while (true) {
    v1::HeartbeatRequest request;
    const auto [worker_id, token] = Credentials();
    request.set_worker_id(worker_id);
    request.set_token(token);
    request.set_epoch(handler()->epoch());
    request.set_step(runner_->step());
    v1::HeartbeatResponse response;
    grpc::Status status;
    // A second attempt only when a standby named the leader, within the
    // same deadline: a heartbeat never waits longer than one RPC timeout.
    const auto deadline = std::chrono::system_clock::now() +
                          std::chrono::milliseconds(options_.rpc_timeout_ms);
    for (int attempt = 0; attempt < 2; ++attempt) {
      const net::LeaderFollower::Pick pick = coordinators_->Current();
      auto context = MakeContext();
      context->set_deadline(deadline);
      status = v1::WorkerService::NewStub(pick.channel)
                   ->Heartbeat(context.get(), request, &response);
      if (status.ok() || Follow(pick, status, *context) !=
                             net::LeaderFollower::Move::kToLeader) {
        break;
      }
    }
    // A move reported by another call (an ack, the rendezvous store)
    // also reaches the plan watch.
    RedirectWatch();
    if (status.ok()) {
      if (!reachable) ZSHARD_LOG_INFO("coordinator reachable again");
      reachable = true;
      if (response.command() == v1::COMMAND_EXIT && response.job_failed()) {
        const std::string reason = response.exit_reason().empty()
                                       ? std::string("no reason given")
                                       : response.exit_reason();
        ZSHARD_LOG_ERROR("the coordinator failed the job",
                         {{"exit_reason", reason}});
        {
          absl::MutexLock lock(&mu_);
          failure_reason_ = "job failed: " + reason;
        }
        runner_->OnJobEnd(true, reason);
        return End(SessionOutcome::kFailed, "job failed: " + reason);
      }
      if (response.command() == v1::COMMAND_EXIT) {
        runner_->OnJobEnd(false, "");
        return End(SessionOutcome::kDone, "job finished");
      }
      if (response.command() == v1::COMMAND_DRAIN) {
        return End(SessionOutcome::kDrained, "drained by the coordinator");
      }
      runner_->OnWaiting(response.waiting());
      // A reply computed before this worker applied a newer commit would
      // abort the new epoch's moves: only the epoch in force is aborted.
      if (response.command() == v1::COMMAND_ABORT &&
          response.epoch() >= handler()->epoch()) {
        runner_->Abort();
      }
      if (response.state() == v1::MEMBER_STATE_DRAINING) {
        const int64_t stable = handler()->stable_epoch();
        absl::MutexLock lock(&mu_);
        if (StartDrainLocked(stable)) {
          ZSHARD_LOG_INFO("draining: handing the state over before leaving");
        }
      }
      if (response.state() == v1::MEMBER_STATE_DEAD ||
          response.state() == v1::MEMBER_STATE_LEFT) {
        return End(SessionOutcome::kFenced, "member declared dead");
      }
    } else if (status.error_code() == grpc::StatusCode::UNAUTHENTICATED) {
      return End(SessionOutcome::kFenced,
                 "token refused: " + status.error_message());
    } else if (status.error_code() == grpc::StatusCode::NOT_FOUND) {
      return End(std::nullopt, "coordinator does not know this worker");
    } else if (reachable) {
      reachable = false;
      ZSHARD_LOG_WARN("heartbeat failed, stepping on",
                      {{"error", status.error_message()}});
    }
    if (absl::Status failure = runner_->failure(); !failure.ok()) {
      {
        absl::MutexLock lock(&mu_);
        failure_reason_ = std::string(failure.message());
      }
      return End(SessionOutcome::kFailed,
                 "workload failed: " + std::string(failure.message()));
    }
    CheckHandover();
    // The job is done when the steps are: wait a lease for COMMAND_EXIT,
    // then leave on our own.
    if (runner_->done()) {
      const int64_t now = RealClock::Get()->NowMs();
      if (!done_since_ms.has_value()) done_since_ms = now;
      if (now - *done_since_ms >= lease_timeout_ms_) {
        return End(SessionOutcome::kDone, "steps done");
      }
    }
    if (SleepUnlessEnded(heartbeat_interval_ms_)) return;
  }
}

void CoordinatorSession::WatchLoop() {
  Backoff backoff(options_.min_backoff_ms, options_.max_backoff_ms);
  v1::WatchPlanRequest request;
  const auto [worker_id, token] = Credentials();
  request.set_worker_id(worker_id);
  request.set_token(token);
  bool redirected = false;
  while (true) {
    grpc::ClientContext context;
    // As MakeContext: wait for one coordinator; with several, fail fast.
    context.set_wait_for_ready(coordinators_->size() == 1);
    const net::LeaderFollower::Pick pick = coordinators_->Current();
    {
      absl::MutexLock lock(&mu_);
      if (ending_.has_value()) return;
      watch_context_ = &context;
      watch_generation_ = pick.generation;
    }
    auto stub = v1::WorkerService::NewStub(pick.channel);
    auto reader = stub->WatchPlan(&context, request);
    v1::PlanUpdate update;
    std::shared_ptr<TransitionHandler> handler = this->handler();
    while (reader->Read(&update)) {
      backoff.Reset();
      redirected = false;
      std::optional<TransitionAck> ack = handler->Apply(update);
      if (ack.has_value()) SendAck(*ack);
      if (update.phase() == v1::PLAN_PHASE_STABLE) CheckHandover();
    }
    grpc::Status status = reader->Finish();
    {
      absl::MutexLock lock(&mu_);
      watch_context_ = nullptr;
    }
    if (status.error_code() == grpc::StatusCode::UNAUTHENTICATED) {
      return End(SessionOutcome::kFenced,
                 "plan watch refused: " + status.error_message());
    }
    if (status.error_code() == grpc::StatusCode::NOT_FOUND) {
      return End(std::nullopt, "coordinator does not know this worker");
    }
    // Reopen at once on the leader a standby named, or where the follower
    // moved meanwhile (RedirectWatch cancelled this stream); else back off.
    const net::LeaderFollower::Move move =
        coordinators_->OnFailure(pick, status, context);
    // Once in a row, so that two standbys naming each other cannot spin.
    if (!redirected &&
        (move == net::LeaderFollower::Move::kToLeader ||
         (move == net::LeaderFollower::Move::kStayed &&
          coordinators_->Current().generation != pick.generation))) {
      redirected = true;
      continue;
    }
    redirected = false;
    if (SleepUnlessEnded(backoff.NextMs())) return;
  }
}

}  // namespace zshard::worker
