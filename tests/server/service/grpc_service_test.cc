// The gRPC adapters in process on 127.0.0.1:0: the happy path of a
// transition over the wire, and hostile inputs getting the right codes.
#include <httplib.h>

#include <future>
#include <string>
#include <thread>
#include <vector>

#include "grpcpp/generic/generic_stub.h"
#include "gtest/gtest.h"
#include "tests/server/coordinator_fixture.h"

namespace zshard::server {
namespace {

using testing::CoordinatorFixture;

class GrpcServiceTest : public CoordinatorFixture {};

TEST_F(GrpcServiceTest, TransitionOverTheWire) {
  v1::JoinResponse a = Join("w0");
  EXPECT_EQ(a.job_name(), "demo");
  EXPECT_EQ(a.heartbeat_interval_ms(), 1000);
  EXPECT_EQ(a.token().size(), 32u);
  EXPECT_FALSE(a.job_spec_json().empty());
  auto watch_ctx = Ctx();
  v1::WatchPlanRequest wreq;
  wreq.set_worker_id(a.worker_id());
  wreq.set_token(a.token());
  auto stream = worker_->WatchPlan(watch_ctx.get(), wreq);
  v1::JoinResponse b = Join("w1");
  v1::PlanUpdate u;
  ASSERT_TRUE(stream->Read(&u));
  EXPECT_EQ(u.phase(), v1::PLAN_PHASE_PROPOSED);
  EXPECT_EQ(u.world(), 2);
  // Cheap fan-out: only the watcher's own assignment.
  ASSERT_EQ(u.assignments_size(), 1);
  EXPECT_EQ(u.assignments(0).name(), "w0");
  EXPECT_EQ(u.assignments(0).worker_id(), a.worker_id());
  EXPECT_EQ(u.assignments(0).rank(), 0);
  EXPECT_EQ(u.assignments(0).labels().at("zone"), "a");
  int64_t epoch = u.epoch();
  ASSERT_TRUE(Ack(a, epoch, v1::ACK_PHASE_PREPARED).ok());
  ASSERT_TRUE(Ack(b, epoch, v1::ACK_PHASE_PREPARED).ok());
  ASSERT_TRUE(stream->Read(&u));
  EXPECT_EQ(u.phase(), v1::PLAN_PHASE_COMMITTED);
  ASSERT_TRUE(Ack(a, epoch, v1::ACK_PHASE_ACTIVE).ok());
  ASSERT_TRUE(Ack(b, epoch, v1::ACK_PHASE_ACTIVE).ok());

  v1::HeartbeatRequest hb;
  hb.set_worker_id(a.worker_id());
  hb.set_token(a.token());
  hb.set_epoch(epoch);
  hb.set_step(12);
  v1::HeartbeatResponse hresp;
  ASSERT_TRUE(worker_->Heartbeat(Ctx().get(), hb, &hresp).ok());
  EXPECT_EQ(hresp.epoch(), epoch);
  EXPECT_EQ(hresp.state(), v1::MEMBER_STATE_ACTIVE);
  EXPECT_EQ(hresp.command(), v1::COMMAND_UNSPECIFIED);

  v1::GetClusterStatusResponse status;
  ASSERT_TRUE(dashboard_
                  ->GetClusterStatus(Ctx().get(), v1::GetClusterStatusRequest(),
                                     &status)
                  .ok());
  EXPECT_EQ(status.job(), "demo");
  EXPECT_EQ(status.state(), v1::CLUSTER_STATE_STABLE);
  EXPECT_EQ(status.world(), 2);
  ASSERT_EQ(status.members_size(), 2);
  EXPECT_EQ(status.members(0).step(), 12);
  EXPECT_EQ(status.members(0).rank(), 0);
  v1::GetPlanRequest preq;
  preq.set_rank(1);
  v1::GetPlanResponse plan;
  ASSERT_TRUE(dashboard_->GetPlan(Ctx().get(), preq, &plan).ok());
  EXPECT_EQ(plan.plan_hash(), status.plan_hash());
  ASSERT_EQ(plan.ranks_size(), 1);
  EXPECT_GT(plan.ranks(0).owned_elements(), 0);
  preq.set_rank(2);
  EXPECT_EQ(dashboard_->GetPlan(Ctx().get(), preq, &plan).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);

  v1::LeaveRequest leave;
  leave.set_worker_id(b.worker_id());
  leave.set_token(b.token());
  v1::LeaveResponse lresp;
  ASSERT_TRUE(worker_->Leave(Ctx().get(), leave, &lresp).ok());
  watch_ctx->TryCancel();
}

TEST_F(GrpcServiceTest, HostileWorkerCallsGetTheRightCodes) {
  v1::JoinResponse a = Join("w0");
  v1::JoinRequest join;
  v1::JoinResponse jresp;
  EXPECT_EQ(worker_->Join(Ctx().get(), join, &jresp).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);  // empty name
  join.set_name(std::string(1 << 20, 'n'));
  EXPECT_EQ(worker_->Join(Ctx().get(), join, &jresp).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);  // huge name

  v1::HeartbeatRequest hb;
  v1::HeartbeatResponse hresp;
  hb.set_worker_id(a.worker_id());
  hb.set_token(std::string(32, '0'));
  EXPECT_EQ(worker_->Heartbeat(Ctx().get(), hb, &hresp).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);  // forged token
  hb.set_worker_id("w-unknown");
  EXPECT_EQ(worker_->Heartbeat(Ctx().get(), hb, &hresp).error_code(),
            grpc::StatusCode::NOT_FOUND);
  hb.set_worker_id(std::string(100000, 'x'));
  EXPECT_EQ(worker_->Heartbeat(Ctx().get(), hb, &hresp).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  hb.set_worker_id(a.worker_id());
  hb.set_token(a.token());
  hb.set_epoch(42);
  EXPECT_EQ(worker_->Heartbeat(Ctx().get(), hb, &hresp).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);  // never proposed

  v1::JoinResponse again = Join("w0");  // the pod restarted
  hb.set_epoch(0);
  EXPECT_EQ(worker_->Heartbeat(Ctx().get(), hb, &hresp).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);  // fenced
  v1::WatchPlanRequest wreq;
  wreq.set_worker_id(a.worker_id());
  wreq.set_token(a.token());
  auto ctx = Ctx();
  auto stream = worker_->WatchPlan(ctx.get(), wreq);
  v1::PlanUpdate u;
  EXPECT_FALSE(stream->Read(&u));
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);

  EXPECT_EQ(Ack(again, 99, v1::ACK_PHASE_PREPARED).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);  // stale epoch
  EXPECT_EQ(Ack(again, 0, v1::ACK_PHASE_UNSPECIFIED).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  v1::ReportSuspectRequest sreq;
  sreq.set_worker_id(again.worker_id());
  sreq.set_token(again.token());
  sreq.set_epoch(7);
  v1::ReportSuspectResponse sresp;
  EXPECT_EQ(worker_->ReportSuspect(Ctx().get(), sreq, &sresp).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
}

TEST_F(GrpcServiceTest, RendezvousIsScopedByEpochAndBounded) {
  v1::JoinResponse a = Join("w0");
  v1::JoinResponse b = Join("w1");
  int64_t epoch = coordinator_->membership()->View().pending_epoch;
  ASSERT_GT(epoch, 0);
  v1::SetRequest set;
  set.set_worker_id(a.worker_id());
  set.set_token(a.token());
  set.set_epoch(epoch);
  set.set_key("nccl/id");
  set.set_value("abc");
  v1::SetResponse sresp;
  ASSERT_TRUE(rendezvous_->Set(Ctx().get(), set, &sresp).ok());

  // A blocked Get is released by a Set from another worker.
  v1::GetRequest get;
  get.set_worker_id(b.worker_id());
  get.set_token(b.token());
  get.set_epoch(epoch);
  get.set_key("late");
  get.set_timeout_ms(5000);
  v1::GetResponse gresp;
  std::thread setter([&] {
    v1::SetRequest s = set;
    s.set_key("late");
    s.set_value("v2");
    v1::SetResponse r;
    EXPECT_TRUE(rendezvous_->Set(Ctx().get(), s, &r).ok());
  });
  ASSERT_TRUE(rendezvous_->Get(Ctx().get(), get, &gresp).ok());
  setter.join();
  EXPECT_EQ(gresp.value(), "v2");

  get.set_key("missing");
  get.set_timeout_ms(20);
  EXPECT_EQ(rendezvous_->Get(Ctx().get(), get, &gresp).error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);
  v1::WaitRequest wait;
  wait.set_worker_id(b.worker_id());
  wait.set_token(b.token());
  wait.set_epoch(epoch);
  wait.add_keys("nccl/id");
  wait.add_keys("late");
  wait.set_timeout_ms(100);
  v1::WaitResponse wresp;
  EXPECT_TRUE(rendezvous_->Wait(Ctx().get(), wait, &wresp).ok());

  get.set_key("nccl/id");
  get.set_epoch(epoch + 1);  // not proposed: stale/foreign epoch
  EXPECT_EQ(rendezvous_->Get(Ctx().get(), get, &gresp).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  get.set_epoch(epoch);
  get.set_token("forged");
  EXPECT_EQ(rendezvous_->Get(Ctx().get(), get, &gresp).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  set.set_value(std::string((1 << 20) + 1, 'v'));
  EXPECT_EQ(rendezvous_->Set(Ctx().get(), set, &sresp).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  set.set_value("v");
  set.set_key(std::string(600, 'k'));
  EXPECT_EQ(rendezvous_->Set(Ctx().get(), set, &sresp).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  set.set_key("");
  EXPECT_EQ(rendezvous_->Set(Ctx().get(), set, &sresp).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  get.set_token(b.token());
  get.set_timeout_ms(-1);
  EXPECT_EQ(rendezvous_->Get(Ctx().get(), get, &gresp).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(GrpcServiceTest, HealthServiceAnswersServing) {
  grpc::GenericStub generic(channel_);
  grpc::ByteBuffer request(nullptr, 0), response;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  std::promise<grpc::Status> done;
  generic.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(),
                    &request, &response,
                    [&](grpc::Status s) { done.set_value(s); });
  ASSERT_TRUE(done.get_future().get().ok());
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(response.Dump(&slices).ok());
  std::string bytes;
  for (const auto& s : slices) {
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  EXPECT_EQ(bytes, std::string("\x08\x01", 2));  // status: SERVING
}

TEST_F(GrpcServiceTest, ShutdownEndsOpenWatchStreams) {
  v1::JoinResponse a = Join("w0");
  v1::WatchPlanRequest wreq;
  wreq.set_worker_id(a.worker_id());
  wreq.set_token(a.token());
  auto ctx = Ctx(30);
  auto stream = worker_->WatchPlan(ctx.get(), wreq);
  stream->WaitForInitialMetadata();
  auto start = std::chrono::steady_clock::now();
  coordinator_->Shutdown();
  v1::PlanUpdate u;
  while (stream->Read(&u)) {
  }
  EXPECT_FALSE(stream->Finish().ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

// Without etcd the coordinator leads from the start and names itself.
TEST_F(GrpcServiceTest, ALoneCoordinatorLeadsAndNamesItself) {
  EXPECT_TRUE(coordinator_->leading());
  EXPECT_EQ(coordinator_->advertise(), coordinator_->address());
  v1::GetClusterStatusResponse resp;
  ASSERT_TRUE(
      dashboard_
          ->GetClusterStatus(Ctx().get(), v1::GetClusterStatusRequest(), &resp)
          .ok());
  EXPECT_EQ(resp.leader(), coordinator_->address());
  EXPECT_EQ(resp.standbys_size(), 0);
}

class MetricsTest : public CoordinatorFixture {
  void SetUp() override {
    CoordinatorOptions options;
    options.http_listen = "127.0.0.1:0";
    StartCoordinator(options);
  }
};

TEST_F(MetricsTest, PrometheusTextHasMembersEpochAndRpcs) {
  Join("w0");
  ASSERT_GT(coordinator_->http_port(), 0);
  httplib::Client http("127.0.0.1", coordinator_->http_port());
  auto res = http.Get("/metrics");
  ASSERT_TRUE(res) << "no answer from /metrics";
  EXPECT_EQ(res->status, 200);
  const std::string& body = res->body;
  EXPECT_NE(body.find("zshard_members{state=\"JOINING\"} 1\n"),
            std::string::npos)
      << body;
  EXPECT_NE(body.find("zshard_epoch 0\n"), std::string::npos);
  // Without etcd it is the only coordinator: it leads, and is ready.
  EXPECT_NE(body.find("\nzshard_leader 1\n"), std::string::npos);
  auto ready = http.Get("/leader");
  ASSERT_TRUE(ready) << "no answer from /leader";
  EXPECT_EQ(ready->status, 200);
  EXPECT_EQ(ready->body, "leader\n");
  // Memory only (no store here): no store writes yet, the counters shown.
  EXPECT_NE(body.find("\nzshard_store_transactions_total 0\n"),
            std::string::npos);
  EXPECT_NE(body.find("\nzshard_store_changes_total 0\n"), std::string::npos);
  EXPECT_NE(
      body.find("zshard_rpc_requests_total{method=\"Join\",code=\"0\"} 1"),
      std::string::npos);
  EXPECT_NE(body.find("zshard_rpc_latency_seconds_count{method=\"Join\"} 1"),
            std::string::npos);
}

class AdminTokenTest : public CoordinatorFixture {
  void SetUp() override {
    CoordinatorOptions options;
    options.admin_token = "s3cret";
    StartCoordinator(options);
  }
};

TEST_F(AdminTokenTest, AdminCallsNeedTheBearerToken) {
  Join("w0");
  v1::DrainWorkerRequest req;
  req.set_name("w0");
  v1::DrainWorkerResponse resp;
  EXPECT_EQ(admin_->DrainWorker(Ctx().get(), req, &resp).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  auto wrong = Ctx();
  wrong->AddMetadata("authorization", "Bearer nope");
  EXPECT_EQ(admin_->DrainWorker(wrong.get(), req, &resp).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  auto right = Ctx();
  right->AddMetadata("authorization", "Bearer s3cret");
  EXPECT_TRUE(admin_->DrainWorker(right.get(), req, &resp).ok());
  auto again = Ctx();
  again->AddMetadata("authorization", "Bearer s3cret");
  req.set_name("nobody");
  EXPECT_EQ(admin_->DrainWorker(again.get(), req, &resp).error_code(),
            grpc::StatusCode::NOT_FOUND);
  v1::SetTargetWorldRequest treq;
  treq.set_world(3);
  v1::SetTargetWorldResponse tresp;
  auto t = Ctx();
  t->AddMetadata("authorization", "Bearer s3cret");
  EXPECT_EQ(admin_->SetTargetWorld(t.get(), treq, &tresp).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

}  // namespace
}  // namespace zshard::server
