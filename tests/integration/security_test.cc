// Integration tests of the coordinator's transport security with real
// processes: server TLS, mutual TLS (a client without a certificate is
// refused) and the admin bearer token (drain refused without it, done with
// it).

#include <signal.h>

#include <chrono>
#include <fstream>

#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "tests/integration/process_cluster.h"
#include "tests/testing/log_scan.h"
#include "tests/testing/tls_certs.h"
#include "zshard/v1/admin_service.grpc.pb.h"

namespace zshard::testing {
namespace {

using nlohmann::json;

bool HasActive(const json& s, int n) { return CountMembers(s, "ACTIVE") == n; }

class SecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    job_.max_world = 2;
    auto tls = MakeTlsFiles(cluster_.dir().path());
    ASSERT_TRUE(tls.ok()) << tls.status();
    tls_ = *tls;
  }

  ProcessCluster cluster_;
  TestJob job_;
  TlsFiles tls_;
};

TEST_F(SecurityTest, ServerTls) {
  ASSERT_TRUE(cluster_
                  .StartCoordinator(job_,
                                    {"--tls-cert", tls_.server_cert,
                                     "--tls-key", tls_.server_key},
                                    /*wait=*/false)
                  .ok());
  const std::vector<std::string> ca = {"--tls-ca", tls_.ca_cert};
  for (const char* name : {"w0", "w1"}) {
    ASSERT_TRUE(cluster_.StartWorker(name, ca).ok());
  }
  auto status = cluster_.WaitForStatus(
      [](const json& s) { return HasActive(s, 2); }, 20000, ca);
  ASSERT_TRUE(status.ok()) << status.status();
  // A plaintext client cannot talk to a TLS server.
  EXPECT_EQ(cluster_.RunCtl({"status", "--timeout-ms", "1000"}), 3);
  // The TLS flags also work as zshardctl's global flags.
  EXPECT_EQ(cluster_.RunCtl({"--tls-ca", tls_.ca_cert, "status", "--output",
                             "json", "--timeout-ms", "2000"}),
            0);
}

TEST_F(SecurityTest, MutualTlsRefusesClientWithoutCertificate) {
  ASSERT_TRUE(
      cluster_
          .StartCoordinator(job_,
                            {"--tls-cert", tls_.server_cert, "--tls-key",
                             tls_.server_key, "--tls-client-ca", tls_.ca_cert},
                            /*wait=*/false)
          .ok());
  const std::vector<std::string> mtls = {"--tls-ca",   tls_.ca_cert,
                                         "--tls-cert", tls_.client_cert,
                                         "--tls-key",  tls_.client_key};
  for (const char* name : {"w0", "w1"}) {
    ASSERT_TRUE(cluster_.StartWorker(name, mtls).ok());
  }
  auto status = cluster_.WaitForStatus(
      [](const json& s) { return HasActive(s, 2); }, 20000, mtls);
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(cluster_.RunCtl(
                {"status", "--timeout-ms", "1000", "--tls-ca", tls_.ca_cert}),
            3);
  EXPECT_EQ(cluster_.RunCtl({"status", "--timeout-ms", "1000"}), 3);
}

class AdminTokenTest : public ::testing::Test {
 protected:
  grpc::Status Drain(const std::string& name, const std::string& token) {
    auto channel = grpc::CreateChannel(cluster_.address(),
                                       grpc::InsecureChannelCredentials());
    auto stub = v1::AdminService::NewStub(channel);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(5));
    if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
    v1::DrainWorkerRequest request;
    request.set_name(name);
    v1::DrainWorkerResponse response;
    return stub->DrainWorker(&context, request, &response);
  }

  ProcessCluster cluster_;
};

TEST_F(AdminTokenTest, DrainNeedsTheToken) {
  const std::string token_file = cluster_.dir().File("admin.token");
  std::ofstream(token_file) << "s3cret-admin-token\n";
  TestJob job;
  job.max_world = 2;
  ASSERT_TRUE(
      cluster_.StartCoordinator(job, {"--admin-token-file", token_file}).ok());
  for (const char* name : {"w0", "w1", "w2"}) {
    ASSERT_TRUE(cluster_.StartWorker(name).ok());
  }
  auto stable = cluster_.WaitForStatus(
      [](const json& s) { return IsStableWorld(s, 2, 1); }, 20000);
  ASSERT_TRUE(stable.ok()) << stable.status();

  EXPECT_EQ(Drain("w0", "").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Drain("w0", "wrong").error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(cluster_.worker("w0")->Running());

  grpc::Status drained = Drain("w0", "s3cret-admin-token");
  ASSERT_TRUE(drained.ok()) << drained.error_message();
  EXPECT_EQ(cluster_.worker("w0")->Wait(10000), 0);
  EXPECT_TRUE(LogContains(cluster_.WorkerLog("w0"), "drained"));
  // The spare takes w0's place.
  auto after = cluster_.WaitForStatus(
      [](const json& s) {
        json w2 = FindMember(s, "w2");
        return IsStableWorld(s, 2, 0) && w2["state"] == "ACTIVE";
      },
      10000);
  EXPECT_TRUE(after.ok()) << after.status();
}

}  // namespace
}  // namespace zshard::testing
