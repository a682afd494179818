// An in-process coordinator on 127.0.0.1:0 with a fake clock, and stubs of
// every service, for adapter tests.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "common/clock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "server/coordinator.h"
#include "tests/server/test_job.h"
#include "zshard/v1/admin_service.grpc.pb.h"
#include "zshard/v1/dashboard_service.grpc.pb.h"
#include "zshard/v1/rendezvous_service.grpc.pb.h"
#include "zshard/v1/worker_service.grpc.pb.h"

namespace zshard::server::testing {

class CoordinatorFixture : public ::testing::Test {
 protected:
  // TestJob with world.resize keep_i: world 2 is I = 2 instances of D = 1
  // (two replicas), as the adapter tests expect.
  static job::JobSpec FixtureJob() {
    job::JobSpec spec = TestJob();
    spec.world.resize = job::ResizePolicy::kKeepI;
    return spec;
  }

  void StartCoordinator(CoordinatorOptions options = {},
                        job::JobSpec spec = FixtureJob()) {
    options.listen = "127.0.0.1:0";
    options.clock = &clock_;
    auto c = Coordinator::Start(std::move(spec), std::move(options));
    ASSERT_TRUE(c.ok()) << c.status();
    coordinator_ = *std::move(c);
    channel_ = grpc::CreateChannel(coordinator_->address(),
                                   grpc::InsecureChannelCredentials());
    worker_ = v1::WorkerService::NewStub(channel_);
    rendezvous_ = v1::RendezvousService::NewStub(channel_);
    dashboard_ = v1::DashboardService::NewStub(channel_);
    admin_ = v1::AdminService::NewStub(channel_);
  }

  void SetUp() override { StartCoordinator(); }

  // A client context that gives up after `seconds`.
  static std::unique_ptr<grpc::ClientContext> Ctx(int seconds = 5) {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->set_deadline(std::chrono::system_clock::now() +
                      std::chrono::seconds(seconds));
    return ctx;
  }

  v1::JoinResponse Join(const std::string& name) {
    v1::JoinRequest req;
    req.set_name(name);
    req.set_address("127.0.0.1:1");
    (*req.mutable_labels())["zone"] = "a";
    v1::JoinResponse resp;
    grpc::Status s = worker_->Join(Ctx().get(), req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp;
  }

  grpc::Status Ack(const v1::JoinResponse& w, int64_t epoch,
                   v1::AckPhase phase) {
    v1::AckTransitionRequest req;
    req.set_worker_id(w.worker_id());
    req.set_token(w.token());
    req.set_epoch(epoch);
    req.set_phase(phase);
    v1::AckTransitionResponse resp;
    return worker_->AckTransition(Ctx().get(), req, &resp);
  }

  FakeClock clock_{1000};
  std::unique_ptr<Coordinator> coordinator_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::WorkerService::Stub> worker_;
  std::unique_ptr<v1::RendezvousService::Stub> rendezvous_;
  std::unique_ptr<v1::DashboardService::Stub> dashboard_;
  std::unique_ptr<v1::AdminService::Stub> admin_;
};

}  // namespace zshard::server::testing
