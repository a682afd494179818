// Tests of the coordinator channel's security against an in-process gRPC
// server with certificates made by openssl: plaintext, server TLS, mutual
// TLS, and a client without a certificate refused by a server that
// requires one.

#include "common/net/channel.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "common/file_io.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/tls_certs.h"
#include "zshard/v1/worker_service.grpc.pb.h"

namespace zshard::net {
namespace {

using ::zshard::testing::TempDir;
using ::zshard::testing::TlsFiles;

class ChannelTest : public ::testing::Test {
 protected:
  // The certificates are made once for the suite (openssl is slow).
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    auto tls = ::zshard::testing::MakeTlsFiles(dir_->path());
    tls_ = new TlsFiles(tls.ok() ? *tls : TlsFiles());
  }
  static void TearDownTestSuite() {
    delete tls_;
    delete dir_;
  }
  void SetUp() override { ASSERT_FALSE(tls_->ca_cert.empty()); }

  // Starts a server whose service answers UNIMPLEMENTED: the handshake is
  // what is tested.
  std::string Serve(std::shared_ptr<grpc::ServerCredentials> credentials) {
    grpc::ServerBuilder builder;
    builder.RegisterService(&service_);
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", credentials, &port);
    server_ = builder.BuildAndStart();
    return absl::StrCat("127.0.0.1:", port);
  }

  std::shared_ptr<grpc::ServerCredentials> ServerTls(bool require_client) {
    grpc::SslServerCredentialsOptions options(
        require_client
            ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
            : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
    options.pem_key_cert_pairs.push_back(
        {*ReadFile(tls_->server_key), *ReadFile(tls_->server_cert)});
    if (require_client) options.pem_root_certs = *ReadFile(tls_->ca_cert);
    return grpc::SslServerCredentials(options);
  }

  static bool Connects(const ChannelOptions& options) {
    auto channel = MakeCoordinatorChannel(options);
    EXPECT_TRUE(channel.ok()) << channel.status();
    if (!channel.ok()) return false;
    return (*channel)->WaitForConnected(std::chrono::system_clock::now() +
                                        std::chrono::milliseconds(300));
  }

  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
  }

  static TempDir* dir_;
  static TlsFiles* tls_;
  v1::WorkerService::Service service_;
  std::unique_ptr<grpc::Server> server_;
};

TempDir* ChannelTest::dir_ = nullptr;
TlsFiles* ChannelTest::tls_ = nullptr;

TEST_F(ChannelTest, ServerTlsNeedsTheCa) {
  const std::string address = Serve(ServerTls(false));
  EXPECT_TRUE(Connects({address, tls_->ca_cert, "", ""}));
  EXPECT_FALSE(Connects({address, "", "", ""}));  // plaintext
}

TEST_F(ChannelTest, MutualTlsRefusesClientWithoutCertificate) {
  const std::string address = Serve(ServerTls(true));
  EXPECT_TRUE(
      Connects({address, tls_->ca_cert, tls_->client_cert, tls_->client_key}));
  EXPECT_FALSE(Connects({address, tls_->ca_cert, "", ""}));
}

TEST_F(ChannelTest, RejectsBadOptions) {
  EXPECT_EQ(MakeCoordinatorChannel({"", "", "", ""}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeCoordinatorChannel({"a:1", "", tls_->client_cert, ""})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeCoordinatorChannel({"a:1", dir_->File("missing.pem"), "", ""})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace zshard::net
