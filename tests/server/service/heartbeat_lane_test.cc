// HeartbeatLane over a real gRPC server on 127.0.0.1: heartbeats from
// several clients are answered on the lane (errors included), a lane ends
// after its server's shutdown with calls still asked for, and a lane whose
// server never started ends too.
#include "server/service/heartbeat_lane.h"

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "gtest/gtest.h"

namespace zshard::server {
namespace {

using Service =
    v1::WorkerService::WithAsyncMethod_Heartbeat<v1::WorkerService::Service>;

// The lane of `service`: epoch 7 for every worker but "fenced".
std::unique_ptr<HeartbeatLane> MakeLane(Service* service,
                                        std::atomic<int>* answered) {
  return std::make_unique<HeartbeatLane>(
      [service](grpc::ServerContext* ctx, v1::HeartbeatRequest* req,
                HeartbeatLane::Writer* writer, grpc::ServerCompletionQueue* cq,
                void* tag) {
        service->RequestHeartbeat(ctx, req, writer, cq, cq, tag);
      },
      [answered](const v1::HeartbeatRequest& req, v1::HeartbeatResponse* resp) {
        answered->fetch_add(1);
        if (req.worker_id() == "fenced") {
          return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "fenced");
        }
        resp->set_epoch(7);
        return grpc::Status::OK;
      },
      /*threads=*/2, /*pending=*/4);
}

TEST(HeartbeatLaneTest, AnswersHeartbeatsAndErrorsThenEnds) {
  Service service;
  std::atomic<int> answered{0};
  std::unique_ptr<HeartbeatLane> lane = MakeLane(&service, &answered);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                           &port);
  builder.RegisterService(&service);
  lane->Attach(&builder);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  lane->Start();
  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                     grpc::InsecureChannelCredentials());
  auto stub = v1::WorkerService::NewStub(channel);
  // More clients than calls asked for ahead: the lane asks for more.
  constexpr int kClients = 8;
  constexpr int kBeats = 50;
  std::atomic<int> ok{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&] {
      for (int i = 0; i < kBeats; ++i) {
        grpc::ClientContext context;
        v1::HeartbeatRequest request;
        request.set_worker_id("w");
        v1::HeartbeatResponse response;
        if (stub->Heartbeat(&context, request, &response).ok() &&
            response.epoch() == 7) {
          ok.fetch_add(1);
        }
      }
    });
  }
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(ok.load(), kClients * kBeats);
  grpc::ClientContext context;
  v1::HeartbeatRequest request;
  request.set_worker_id("fenced");
  v1::HeartbeatResponse response;
  const grpc::Status refused = stub->Heartbeat(&context, request, &response);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(refused.error_message(), "fenced");
  EXPECT_EQ(answered.load(), kClients * kBeats + 1);
  // Calls asked for ahead are pending: the shutdown ends them, Stop drains.
  server->Shutdown();
  lane->Stop();
  lane->Stop();  // idempotent
  server.reset();
  lane.reset();
}

TEST(HeartbeatLaneTest, ALaneWhoseServerNeverStartedEnds) {
  Service service;
  std::atomic<int> answered{0};
  std::unique_ptr<HeartbeatLane> lane = MakeLane(&service, &answered);
  {
    grpc::ServerBuilder builder;
    lane->Attach(&builder);
    // Never built: Stop shuts the queue down and drains it.
  }
  lane->Stop();
  std::unique_ptr<HeartbeatLane> unattached = MakeLane(&service, &answered);
  unattached->Stop();
  EXPECT_EQ(answered.load(), 0);
}

}  // namespace
}  // namespace zshard::server
