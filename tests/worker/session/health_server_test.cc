// Tests of the worker's /healthz and /metrics endpoint over real HTTP.

#include "client/worker/session/health_server.h"

#include <atomic>

#include "gtest/gtest.h"
#include "httplib.h"

namespace zshard::worker {
namespace {

TEST(HealthServerTest, HealthzFollowsTheSessionAndMetricsRender) {
  std::atomic<bool> alive{true};
  auto server = HealthServer::Start("127.0.0.1:0", "w0", [&alive] {
    return HealthSnapshot{alive.load(), 42, 3};
  });
  ASSERT_TRUE(server.ok()) << server.status();
  httplib::Client client("127.0.0.1", (*server)->port());
  auto healthz = client.Get("/healthz");
  ASSERT_TRUE(healthz);
  EXPECT_EQ(healthz->status, 200);
  auto metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("zshard_worker_step{worker=\"w0\"} 42\n"),
            std::string::npos)
      << metrics->body;
  EXPECT_NE(metrics->body.find("zshard_worker_epoch{worker=\"w0\"} 3\n"),
            std::string::npos);
  EXPECT_NE(metrics->body.find("zshard_worker_up{worker=\"w0\"} 1\n"),
            std::string::npos);
  alive = false;
  healthz = client.Get("/healthz");
  ASSERT_TRUE(healthz);
  EXPECT_EQ(healthz->status, 503);
}

TEST(HealthServerTest, RejectsBadAddressesAndEscapesNames) {
  auto probe = [] { return HealthSnapshot{}; };
  EXPECT_EQ(HealthServer::Start("nonsense", "w", probe).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(HealthServer::Start("127.0.0.1:99999", "w", probe).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_NE(HealthServer::RenderMetrics("a\"b", HealthSnapshot{})
                .find("worker=\"a\\\"b\""),
            std::string::npos);
}

}  // namespace
}  // namespace zshard::worker
