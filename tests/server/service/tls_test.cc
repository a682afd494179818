// TLS and mutual TLS on the coordinator's gRPC port, with a CA, server and
// client certificates made by openssl at test time.
#include <stdlib.h>

#include <cstdlib>
#include <string>

#include "common/file_io.h"
#include "gtest/gtest.h"
#include "tests/server/coordinator_fixture.h"

namespace zshard::server {
namespace {

// Makes ca.pem, server.{pem,key} (SAN 127.0.0.1, localhost) and
// client.{pem,key} in a new temp dir; returns the dir.
std::string MakeCertificates() {
  std::string dir = ::testing::TempDir() + "/zshard-tls-XXXXXX";
  if (mkdtemp(dir.data()) == nullptr) return "";
  std::string key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  std::string script =
      "set -e; cd '" + dir + "'; " +
      "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > san.ext; " +
      "openssl req -x509 " + key +
      " -keyout ca.key -out ca.pem -days 1 -subj /CN=zshard-test-ca; " +
      "openssl req " + key +
      " -keyout server.key -out server.csr -subj /CN=localhost; " +
      "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key "
      "-CAcreateserial -out server.pem -days 1 -extfile san.ext; " +
      "openssl req " + key +
      " -keyout client.key -out client.csr -subj /CN=zshard-worker; " +
      "openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key "
      "-CAcreateserial -out client.pem -days 1";
  std::string cmd = "sh -c \"" + script + "\" > /dev/null 2>&1";
  return std::system(cmd.c_str()) == 0 ? dir : "";
}

std::string Read(const std::string& path) {
  auto s = ReadFile(path);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *s : "";
}

class TlsTest : public ::testing::Test {
 protected:
  void Start(bool require_client_cert) {
    dir_ = MakeCertificates();
    ASSERT_FALSE(dir_.empty()) << "openssl failed";
    CoordinatorOptions o;
    o.listen = "127.0.0.1:0";
    o.clock = &clock_;
    o.tls_cert_pem = Read(dir_ + "/server.pem");
    o.tls_key_pem = Read(dir_ + "/server.key");
    if (require_client_cert) o.tls_client_ca_pem = Read(dir_ + "/ca.pem");
    auto c = Coordinator::Start(testing::TestJob(), o);
    ASSERT_TRUE(c.ok()) << c.status();
    coordinator_ = *std::move(c);
  }

  grpc::StatusCode JoinWith(std::shared_ptr<grpc::ChannelCredentials> creds) {
    auto stub = v1::WorkerService::NewStub(
        grpc::CreateChannel(coordinator_->address(), creds));
    v1::JoinRequest req;
    req.set_name("w0");
    v1::JoinResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(3));
    return stub->Join(&ctx, req, &resp).error_code();
  }

  grpc::SslCredentialsOptions Ssl(bool with_client_cert) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = Read(dir_ + "/ca.pem");
    if (with_client_cert) {
      ssl.pem_private_key = Read(dir_ + "/client.key");
      ssl.pem_cert_chain = Read(dir_ + "/client.pem");
    }
    return ssl;
  }

  FakeClock clock_;
  std::string dir_;
  std::unique_ptr<Coordinator> coordinator_;
};

TEST_F(TlsTest, ServerSpeaksTls) {
  Start(/*require_client_cert=*/false);
  EXPECT_EQ(JoinWith(grpc::SslCredentials(Ssl(false))), grpc::StatusCode::OK);
  EXPECT_NE(JoinWith(grpc::InsecureChannelCredentials()), grpc::StatusCode::OK);
}

TEST_F(TlsTest, ClientCaRequiresClientCertificates) {
  Start(/*require_client_cert=*/true);
  EXPECT_NE(JoinWith(grpc::SslCredentials(Ssl(false))), grpc::StatusCode::OK);
  EXPECT_EQ(JoinWith(grpc::SslCredentials(Ssl(true))), grpc::StatusCode::OK);
}

TEST(TlsOptionsTest, CertWithoutKeyIsRefused) {
  CoordinatorOptions o;
  o.tls_cert_pem = "x";
  EXPECT_EQ(Coordinator::Start(testing::TestJob(), o).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// What the coordinator does not run of a model-parallel job is refused in
// one line naming it: a workload other than the synthetic or trainer one,
// and a restore of other tensor or pipeline sizes.
TEST(CoordinatorStartTest, WhatAModelParallelJobCannotRunIsRefusedInOneLine) {
  job::JobSpec spec = testing::TestJob();
  spec.parallel.tensor = 2;
  spec.slots = {spec.model, spec.model};
  spec.workload.kind = job::WorkloadKind::kRegression;
  const std::string what = "job '" + spec.name +
                           "' is model-parallel (tensor 2, pipeline 1, "
                           "context 1): ";
  absl::StatusOr<std::unique_ptr<Coordinator>> c =
      Coordinator::Start(spec, CoordinatorOptions());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c.status().message(),
            what +
                "the coordinator runs model-parallel jobs with the synthetic "
                "or trainer workload only (workload 'regression')");
  spec.workload.kind = job::WorkloadKind::kSynthetic;
  CoordinatorOptions restore;
  CheckpointRecord written;
  written.tensor = 2;
  written.pipeline = 2;
  restore.membership.restore = written;
  c = Coordinator::Start(spec, restore);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(),
            "the checkpoint was written with tensor 2, pipeline 2, context 1; "
            "this job has tensor 2, pipeline 1, context 1: restore needs the "
            "same tensor and pipeline sizes");
}

TEST(CoordinatorStartTest, UnusableStateDirFailsCleanly) {
  CoordinatorOptions o;
  o.state_dir = "/proc/zshard-no-such/dir";
  EXPECT_FALSE(Coordinator::Start(testing::TestJob(), o).ok());
}

}  // namespace
}  // namespace zshard::server
