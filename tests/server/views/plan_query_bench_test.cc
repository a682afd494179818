// A measurement, not a check of speed (disabled; run with
// --gtest_also_run_disabled_tests): GetPlan's "who owns param X elements
// 0..4096?" over gRPC on a llama2-70b job at W=1024, I=8, first (index
// built) and cached.
#include <chrono>
#include <cstdio>

#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "server/coordinator.h"
#include "zshard/v1/dashboard_service.grpc.pb.h"

namespace zshard::server {
namespace {

TEST(PlanQueryBench, DISABLED_Llama70bW1024ParamOwners) {
  job::JobSpec spec =
      job::ParseJobSpec(
          R"({"name": "big", "model": {"preset": "llama2-70b"},)"
          R"("world": {"instances": 8, "min": 8, "max": 1024},)"
          R"("lease_timeout_ms": 600000, "heartbeat_interval_ms": 1000,)"
          R"("workload": {"kind": "idle"}})")
          .value();
  FakeClock clock(1000);
  CoordinatorOptions options;
  options.clock = &clock;
  auto c = Coordinator::Start(spec, options).value();
  Membership* m = c->membership();
  std::vector<JoinReply> joined;
  for (int i = 0; i < 1024; ++i) {
    joined.push_back(
        m->Join({"w" + std::to_string(i), "127.0.0.1:1", {}, {}}).value());
  }
  // Joins propose as they come; ack until epoch with world 1024 commits.
  for (int round = 0; round < 20 && m->View().world != 1024; ++round) {
    int64_t e = m->View().pending_epoch;
    if (e == 0) break;
    for (const JoinReply& j : joined) {
      (void)m->AckPrepared(j.worker_id, j.token, e, 0, false);
    }
    for (const JoinReply& j : joined) {
      (void)m->AckActive(j.worker_id, j.token, e);
    }
  }
  ASSERT_EQ(m->View().world, 1024);
  auto stub = v1::DashboardService::NewStub(
      grpc::CreateChannel(c->address(), grpc::InsecureChannelCredentials()));
  v1::GetPlanRequest req;
  req.set_param("model.layers.40.mlp.up_proj.weight");
  req.set_param_end(4096);
  for (int i = 0; i < 6; ++i) {
    grpc::ClientContext ctx;
    v1::GetPlanResponse resp;
    auto t0 = std::chrono::steady_clock::now();
    grpc::Status s = stub->GetPlan(&ctx, req, &resp);
    auto t1 = std::chrono::steady_clock::now();
    ASSERT_TRUE(s.ok()) << s.error_message();
    std::printf("GetPlan param owners (%s): %.2f ms, %d pieces\n",
                i == 0 ? "first, index built" : "cached",
                std::chrono::duration<double, std::milli>(t1 - t0).count(),
                resp.pieces_size());
  }
}

}  // namespace
}  // namespace zshard::server
