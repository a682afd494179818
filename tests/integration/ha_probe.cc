// The probes: one short-lived channel per call, 5 s deadlines.
#include "tests/integration/ha_probe.h"

#include <chrono>
#include <future>
#include <memory>

#include "common/grpc_status.h"
#include "common/net/leader_follower.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "zshard/v1/dashboard_service.grpc.pb.h"
#include "zshard/v1/rendezvous_service.grpc.pb.h"
#include "zshard/v1/worker_service.grpc.pb.h"

namespace zshard::testing {
namespace {

std::shared_ptr<grpc::Channel> Channel(const std::string& address) {
  // Its own subchannel: a refused connect of an earlier probe does not make
  // this one wait out gRPC's reconnect backoff.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(),
                                   args);
}

void Deadline(grpc::ClientContext* ctx) {
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
}

// A finished call's status and the leader its trailers name.
RpcAnswer Answer(const grpc::Status& s, const grpc::ClientContext& ctx) {
  RpcAnswer answer;
  answer.code = s.error_code();
  answer.message = s.error_message();
  answer.leader = net::LeaderFromTrailers(ctx);
  return answer;
}

}  // namespace

int HealthOf(const std::string& address, const std::string& service) {
  grpc::GenericStub generic(Channel(address));
  // HealthCheckRequest{service = 1}.
  std::string request_bytes;
  if (!service.empty()) {
    request_bytes =
        std::string("\x0a", 1) + static_cast<char>(service.size()) + service;
  }
  grpc::Slice slice(request_bytes);
  grpc::ByteBuffer request(&slice, 1), response;
  grpc::ClientContext ctx;
  Deadline(&ctx);
  std::promise<grpc::Status> done;
  generic.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(),
                    &request, &response,
                    [&](grpc::Status s) { done.set_value(s); });
  if (!done.get_future().get().ok()) return -1;
  std::vector<grpc::Slice> slices;
  if (!response.Dump(&slices).ok()) return -1;
  std::string bytes;
  for (const auto& s : slices) {
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  // HealthCheckResponse{status = 1}: 08 NN.
  if (bytes.size() != 2 || bytes[0] != '\x08') return -1;
  return bytes[1];
}

RpcAnswer HeartbeatAnswer(const std::string& address) {
  auto stub = v1::WorkerService::NewStub(Channel(address));
  grpc::ClientContext ctx;
  Deadline(&ctx);
  v1::HeartbeatRequest req;
  req.set_worker_id("nobody");
  req.set_token("0");
  v1::HeartbeatResponse resp;
  grpc::Status s = stub->Heartbeat(&ctx, req, &resp);
  return Answer(s, ctx);
}

RpcAnswer WatchPlanAnswer(const std::string& address) {
  auto stub = v1::WorkerService::NewStub(Channel(address));
  grpc::ClientContext ctx;
  Deadline(&ctx);
  v1::WatchPlanRequest req;
  req.set_worker_id("nobody");
  req.set_token("0");
  auto stream = stub->WatchPlan(&ctx, req);
  v1::PlanUpdate update;
  while (stream->Read(&update)) {
  }
  grpc::Status s = stream->Finish();
  return Answer(s, ctx);
}

absl::StatusOr<v1::GetClusterStatusResponse> ClusterStatus(
    const std::string& address) {
  auto stub = v1::DashboardService::NewStub(Channel(address));
  grpc::ClientContext ctx;
  Deadline(&ctx);
  v1::GetClusterStatusResponse resp;
  grpc::Status s =
      stub->GetClusterStatus(&ctx, v1::GetClusterStatusRequest(), &resp);
  if (!s.ok()) return FromGrpcStatus(s);
  return resp;
}

absl::StatusOr<TestSession> JoinAs(const std::string& address,
                                   const std::string& name) {
  auto stub = v1::WorkerService::NewStub(Channel(address));
  grpc::ClientContext ctx;
  Deadline(&ctx);
  v1::JoinRequest req;
  req.set_name(name);
  req.set_address("127.0.0.1:1");
  (*req.mutable_labels())["node"] = "n-" + name;
  v1::JoinResponse resp;
  grpc::Status s = stub->Join(&ctx, req, &resp);
  if (!s.ok()) return FromGrpcStatus(s);
  return TestSession{resp.worker_id(), resp.token()};
}

absl::Status Heartbeat(const std::string& address, const TestSession& session,
                       int64_t epoch) {
  auto stub = v1::WorkerService::NewStub(Channel(address));
  grpc::ClientContext ctx;
  Deadline(&ctx);
  v1::HeartbeatRequest req;
  req.set_worker_id(session.worker_id);
  req.set_token(session.token);
  req.set_epoch(epoch);
  v1::HeartbeatResponse resp;
  return FromGrpcStatus(stub->Heartbeat(&ctx, req, &resp));
}

absl::Status RendezvousSet(const std::string& address,
                           const TestSession& session, int64_t epoch,
                           const std::string& key, const std::string& value) {
  auto stub = v1::RendezvousService::NewStub(Channel(address));
  grpc::ClientContext ctx;
  Deadline(&ctx);
  v1::SetRequest req;
  req.set_worker_id(session.worker_id);
  req.set_token(session.token);
  req.set_epoch(epoch);
  req.set_key(key);
  req.set_value(value);
  v1::SetResponse resp;
  return FromGrpcStatus(stub->Set(&ctx, req, &resp));
}

absl::StatusOr<std::string> RendezvousGet(const std::string& address,
                                          const TestSession& session,
                                          int64_t epoch,
                                          const std::string& key) {
  auto stub = v1::RendezvousService::NewStub(Channel(address));
  grpc::ClientContext ctx;
  Deadline(&ctx);
  v1::GetRequest req;
  req.set_worker_id(session.worker_id);
  req.set_token(session.token);
  req.set_epoch(epoch);
  req.set_key(key);
  req.set_timeout_ms(0);
  v1::GetResponse resp;
  grpc::Status s = stub->Get(&ctx, req, &resp);
  if (!s.ok()) return FromGrpcStatus(s);
  return resp.value();
}

}  // namespace zshard::testing
