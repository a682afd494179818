// WorkerService adapter: proto in, Membership call, proto out.
#pragma once

#include "common/clock.h"
#include "server/membership/membership.h"
#include "server/metrics/rpc_metrics.h"
#include "server/service/blocking_call_pool.h"
#include "server/service/heartbeat_lane.h"
#include "server/service/plan_watch.h"
#include "server/service/rpc_scope.h"
#include "server/telemetry/telemetry_store.h"
#include "zshard/v1/worker_service.grpc.pb.h"

namespace zshard::server {

// Thread-safe (the membership is). Borrows `membership`, `telemetry` and
// `clock` (telemetry may be null: reports are counted, not kept) and
// `metrics` (may be null); all outlive the service.
// Heartbeat is on the async API, served by a lane of its own
// (heartbeat_lane.h): AttachHeartbeats before the server is built,
// StartHeartbeats once it runs, StopHeartbeats once it is shut down.
class WorkerServiceImpl final
    : public v1::WorkerService::WithCallbackMethod_Join<
          v1::WorkerService::WithRawCallbackMethod_WatchPlan<
              v1::WorkerService::WithCallbackMethod_AckTransition<
                  v1::WorkerService::WithCallbackMethod_Leave<
                      // Innermost: async only while the method is still
                      // sync (gRPC keeps a callback method callback).
                      v1::WorkerService::WithAsyncMethod_Heartbeat<
                          v1::WorkerService::Service>>>>> {
 public:
  WorkerServiceImpl(Membership* membership, RpcMetrics* metrics,
                    TelemetryStore* telemetry = nullptr,
                    Clock* clock = RealClock::Get());

  void AttachHeartbeats(grpc::ServerBuilder* builder) {
    heartbeats_.Attach(builder);
  }
  void StartHeartbeats() { heartbeats_.Start(); }
  void StopHeartbeats() { heartbeats_.Stop(); }

  // Join, AckTransition and Leave take the membership's lock and wait for
  // their store write: they are answered on the callback API by a few
  // threads of their own (blocking_call_pool.h), so a storm of them holds
  // those threads, not one thread per member.
  grpc::ServerUnaryReactor* Join(grpc::CallbackServerContext* ctx,
                                 const v1::JoinRequest* req,
                                 v1::JoinResponse* resp) override;
  // One heartbeat, answered on the heartbeat lane.
  grpc::Status AnswerHeartbeat(const v1::HeartbeatRequest& req,
                               v1::HeartbeatResponse* resp);
  // Streams the snapshot, then every update, until the client cancels or
  // the server shuts down (UNAVAILABLE). UNAUTHENTICATED at the start for
  // a bad or fenced session; a session fenced later is told by Heartbeat.
  // (Callback API with raw bytes: open streams hold no thread, and each
  // update is serialised once for every watcher.)
  grpc::ServerWriteReactor<grpc::ByteBuffer>* WatchPlan(
      grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req) override;
  grpc::ServerUnaryReactor* AckTransition(
      grpc::CallbackServerContext* ctx, const v1::AckTransitionRequest* req,
      v1::AckTransitionResponse* resp) override;
  grpc::Status ReportSuspect(grpc::ServerContext* ctx,
                             const v1::ReportSuspectRequest* req,
                             v1::ReportSuspectResponse* resp) override;
  grpc::ServerUnaryReactor* Leave(grpc::CallbackServerContext* ctx,
                                  const v1::LeaveRequest* req,
                                  v1::LeaveResponse* resp) override;
  grpc::Status ReportCheckpoint(grpc::ServerContext* ctx,
                                const v1::ReportCheckpointRequest* req,
                                v1::ReportCheckpointResponse* resp) override;
  grpc::Status ReportEvent(grpc::ServerContext* ctx,
                           const v1::ReportEventRequest* req,
                           v1::ReportEventResponse* resp) override;
  // The job has its model: OK when the given one matches it,
  // FAILED_PRECONDITION naming the first difference otherwise.
  grpc::Status ProvideModel(grpc::ServerContext* ctx,
                            const v1::ProvideModelRequest* req,
                            v1::ProvideModelResponse* resp) override;
  grpc::Status StreamTelemetry(grpc::ServerContext* ctx,
                               grpc::ServerReader<v1::TelemetryReport>* reader,
                               v1::StreamTelemetryResponse* resp) override;

 private:
  // Runs `handle` on the pool and finishes the call with its status, timed
  // as `method` from the call's arrival.
  template <typename Req, typename Resp>
  grpc::ServerUnaryReactor* OnPool(
      grpc::CallbackServerContext* ctx, const char* method, const Req* req,
      Resp* resp,
      grpc::Status (WorkerServiceImpl::*handle)(RpcScope&, const Req*, Resp*));
  grpc::Status DoJoin(RpcScope& scope, const v1::JoinRequest* req,
                      v1::JoinResponse* resp);
  grpc::Status DoAck(RpcScope& scope, const v1::AckTransitionRequest* req,
                     v1::AckTransitionResponse* resp);
  grpc::Status DoLeave(RpcScope& scope, const v1::LeaveRequest* req,
                       v1::LeaveResponse* resp);

  Membership* membership_;
  RpcMetrics* metrics_;
  TelemetryStore* telemetry_;
  Clock* clock_;
  PlanWatchHub watch_hub_;
  // Last: destroyed first, while what their calls use is still there.
  BlockingCallPool pool_{8};
  HeartbeatLane heartbeats_;
};

}  // namespace zshard::server
