// WorkerService adapter.
#include "server/service/worker_service.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/grpc_status.h"
#include "common/plan/model_match.h"
#include "server/service/checkpoint_convert.h"
#include "server/service/model_intake_service.h"
#include "server/service/proto_convert.h"
#include "server/service/rpc_scope.h"

namespace zshard::server {
namespace {

TelemetryPoint FromProto(const v1::TelemetryReport& r, Clock* clock) {
  TelemetryPoint p;
  p.step = r.step();
  p.epoch = r.epoch();
  p.time_ms = clock->NowMs();
  for (const v1::PhaseTime& t : r.phase_times()) {
    p.phases.emplace_back(t.phase(), t.ms());
  }
  p.bytes_sent = r.bytes_sent();
  p.bytes_received = r.bytes_received();
  p.memory_bytes = std::map<std::string, int64_t>(r.memory_bytes().begin(),
                                                  r.memory_bytes().end());
  p.loss = r.loss();
  p.grad_norm = r.grad_norm();
  p.skipped = r.skipped();
  return p;
}

}  // namespace

template <typename Req, typename Resp>
grpc::ServerUnaryReactor* WorkerServiceImpl::OnPool(
    grpc::CallbackServerContext* ctx, const char* method, const Req* req,
    Resp* resp,
    grpc::Status (WorkerServiceImpl::*handle)(RpcScope&, const Req*, Resp*)) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  // Timed from here: the wait in the pool's queue counts.
  auto scope = std::make_shared<RpcScope>(metrics_, method);
  pool_.Submit([this, scope, req, resp, reactor, handle] {
    reactor->Finish((this->*handle)(*scope, req, resp));
  });
  return reactor;
}

grpc::ServerUnaryReactor* WorkerServiceImpl::Join(
    grpc::CallbackServerContext* ctx, const v1::JoinRequest* req,
    v1::JoinResponse* resp) {
  return OnPool(ctx, "Join", req, resp, &WorkerServiceImpl::DoJoin);
}

grpc::ServerUnaryReactor* WorkerServiceImpl::AckTransition(
    grpc::CallbackServerContext* ctx, const v1::AckTransitionRequest* req,
    v1::AckTransitionResponse* resp) {
  return OnPool(ctx, "AckTransition", req, resp, &WorkerServiceImpl::DoAck);
}

grpc::ServerUnaryReactor* WorkerServiceImpl::Leave(
    grpc::CallbackServerContext* ctx, const v1::LeaveRequest* req,
    v1::LeaveResponse* resp) {
  return OnPool(ctx, "Leave", req, resp, &WorkerServiceImpl::DoLeave);
}

grpc::Status WorkerServiceImpl::DoJoin(RpcScope& scope,
                                       const v1::JoinRequest* req,
                                       v1::JoinResponse* resp) {
  JoinArgs args;
  args.name = req->name();
  args.address = req->address();
  args.labels = std::map<std::string, std::string>(req->labels().begin(),
                                                   req->labels().end());
  args.device = FromProto(req->device());
  absl::StatusOr<JoinReply> r = membership_->Join(args);
  if (!r.ok()) return scope.Finish(ToGrpcStatus(r.status()));
  const job::JobSpec& spec = membership_->spec();
  resp->set_worker_id(r->worker_id);
  resp->set_token(r->token);
  resp->set_job_name(spec.name);
  resp->set_job_spec_json(job::JobSpecToJson(spec));
  resp->set_heartbeat_interval_ms(spec.heartbeat_interval_ms);
  resp->set_lease_timeout_ms(spec.lease_timeout_ms);
  resp->set_epoch(r->epoch);
  return scope.Finish(grpc::Status::OK);
}

WorkerServiceImpl::WorkerServiceImpl(Membership* membership,
                                     RpcMetrics* metrics,
                                     TelemetryStore* telemetry, Clock* clock)
    : membership_(membership),
      metrics_(metrics),
      telemetry_(telemetry),
      clock_(clock),
      watch_hub_(membership),
      heartbeats_(
          [this](grpc::ServerContext* ctx, v1::HeartbeatRequest* req,
                 HeartbeatLane::Writer* writer, grpc::ServerCompletionQueue* cq,
                 void* tag) {
            RequestHeartbeat(ctx, req, writer, cq, cq, tag);
          },
          [this](const v1::HeartbeatRequest& req, v1::HeartbeatResponse* resp) {
            return AnswerHeartbeat(req, resp);
          }) {}

grpc::Status WorkerServiceImpl::AnswerHeartbeat(const v1::HeartbeatRequest& req,
                                                v1::HeartbeatResponse* resp) {
  RpcScope scope(metrics_, "Heartbeat");
  absl::StatusOr<HeartbeatReply> r = membership_->Heartbeat(
      req.worker_id(), req.token(), req.epoch(), req.step());
  if (!r.ok()) return scope.Finish(ToGrpcStatus(r.status()));
  resp->set_epoch(r->epoch);
  resp->set_pending_epoch(r->pending_epoch);
  resp->set_state(ToProto(r->state));
  resp->set_command(ToProto(r->command));
  resp->set_job_failed(r->job_failed);
  resp->set_exit_reason(r->exit_reason);
  resp->set_waiting(r->waiting);
  return scope.Finish(grpc::Status::OK);
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* WorkerServiceImpl::WatchPlan(
    grpc::CallbackServerContext*, const grpc::ByteBuffer* raw) {
  RpcScope scope(metrics_, "WatchPlan");
  std::vector<grpc::Slice> slices;
  std::string bytes;
  if (raw->Dump(&slices).ok()) {
    for (const grpc::Slice& s : slices) {
      bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
  }
  v1::WatchPlanRequest req;
  grpc::Status session;
  if (!req.ParseFromString(bytes)) {
    session = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                           "watch plan request does not parse");
  } else {
    session =
        ToGrpcStatus(membership_->CheckSession(req.worker_id(), req.token()));
  }
  return watch_hub_.Open(scope.Finish(session), req.worker_id());
}

grpc::Status WorkerServiceImpl::DoAck(RpcScope& scope,
                                      const v1::AckTransitionRequest* req,
                                      v1::AckTransitionResponse* resp) {
  absl::StatusOr<PlanPhase> r;
  switch (req->phase()) {
    case v1::ACK_PHASE_PREPARED: {
      PreparedAck ack;
      ack.step = req->step();
      ack.adam_step = req->adam_step();
      ack.commit_point_passed = req->commit_point_passed();
      ack.commit_pending = req->commit_pending();
      ack.commit_values.assign(req->commit_values().begin(),
                               req->commit_values().end());
      r = membership_->AckPrepared(req->worker_id(), req->token(), req->epoch(),
                                   ack);
      break;
    }
    case v1::ACK_PHASE_ACTIVE:
      r = membership_->AckActive(req->worker_id(), req->token(), req->epoch());
      break;
    case v1::ACK_PHASE_FAILED: {
      PrepareFailure failure;
      failure.error = req->error().substr(0, 1024);
      failure.source = req->failed_source().substr(0, 1024);
      failure.source_is_checkpoint = req->source_is_checkpoint();
      failure.step = req->step();
      if (req->has_peer_rank()) {
        failure.peer_rank = req->peer_rank();
        failure.peer_group = req->peer_group().substr(0, 128);
        failure.peer_closed = req->peer_closed();
      }
      r = membership_->AckFailed(req->worker_id(), req->token(), req->epoch(),
                                 failure);
      break;
    }
    default:
      r = absl::InvalidArgumentError(
          "phase must be PREPARED, ACTIVE or FAILED");
  }
  if (!r.ok()) return scope.Finish(ToGrpcStatus(r.status()));
  resp->set_phase(ToProto(*r));
  return scope.Finish(grpc::Status::OK);
}

grpc::Status WorkerServiceImpl::ReportSuspect(
    grpc::ServerContext*, const v1::ReportSuspectRequest* req,
    v1::ReportSuspectResponse* resp) {
  RpcScope scope(metrics_, "ReportSuspect");
  std::string reason = req->reason();
  if (req->collective_failed()) reason = "collective failed: " + reason;
  absl::StatusOr<MemberState> r = membership_->ReportSuspect(
      req->worker_id(), req->token(), req->epoch(), req->suspect_worker_id(),
      req->suspect_rank(), reason);
  if (!r.ok()) return scope.Finish(ToGrpcStatus(r.status()));
  resp->set_suspect_state(ToProto(*r));
  return scope.Finish(grpc::Status::OK);
}

grpc::Status WorkerServiceImpl::DoLeave(RpcScope& scope,
                                        const v1::LeaveRequest* req,
                                        v1::LeaveResponse* resp) {
  absl::StatusOr<bool> handover =
      membership_->Leave(req->worker_id(), req->token(), req->reason());
  if (!handover.ok()) return scope.Finish(ToGrpcStatus(handover.status()));
  resp->set_handover(*handover);
  return scope.Finish(grpc::Status::OK);
}

grpc::Status WorkerServiceImpl::ReportEvent(grpc::ServerContext*,
                                            const v1::ReportEventRequest* req,
                                            v1::ReportEventResponse*) {
  RpcScope scope(metrics_, "ReportEvent");
  return scope.Finish(ToGrpcStatus(membership_->WorkerEvent(
      req->worker_id(), req->token(), req->kind(), req->reason())));
}

grpc::Status WorkerServiceImpl::ProvideModel(grpc::ServerContext*,
                                             const v1::ProvideModelRequest* req,
                                             v1::ProvideModelResponse*) {
  RpcScope scope(metrics_, "ProvideModel");
  const job::JobSpec& spec = membership_->spec();
  absl::StatusOr<plan::ModelSpec> got =
      CheckGivenModel(spec, req->model_json());
  if (!got.ok()) return scope.Finish(ToGrpcStatus(got.status()));
  absl::Status same = plan::MatchModel(spec.model, *got);
  if (!same.ok()) {
    return scope.Finish(
        ToGrpcStatus(absl::FailedPreconditionError(same.message())));
  }
  return scope.Finish(grpc::Status::OK);
}

grpc::Status WorkerServiceImpl::ReportCheckpoint(
    grpc::ServerContext*, const v1::ReportCheckpointRequest* req,
    v1::ReportCheckpointResponse* resp) {
  RpcScope scope(metrics_, "ReportCheckpoint");
  absl::StatusOr<bool> committed = membership_->ReportCheckpoint(
      req->worker_id(), req->token(), FromProto(*req));
  if (!committed.ok()) return scope.Finish(ToGrpcStatus(committed.status()));
  resp->set_manifest_committed(*committed);
  return scope.Finish(grpc::Status::OK);
}

grpc::Status WorkerServiceImpl::StreamTelemetry(
    grpc::ServerContext*, grpc::ServerReader<v1::TelemetryReport>* reader,
    v1::StreamTelemetryResponse* resp) {
  RpcScope scope(metrics_, "StreamTelemetry");
  v1::TelemetryReport report;
  std::string session;
  while (reader->Read(&report)) {
    // The session is checked once per stream, and again if it changes.
    if (session != report.worker_id() + "/" + report.token()) {
      absl::Status s =
          membership_->CheckSession(report.worker_id(), report.token());
      if (!s.ok()) return scope.Finish(ToGrpcStatus(s));
      session = report.worker_id() + "/" + report.token();
    }
    resp->set_reports(resp->reports() + 1);
    resp->set_last_step(report.step());
    if (telemetry_ != nullptr) {
      telemetry_->Record(report.worker_id(), FromProto(report, clock_));
    }
  }
  return scope.Finish(grpc::Status::OK);
}

}  // namespace zshard::server
