// TLS to etcd against a real etcd started by the test with HTTPS and client
// certificates: the right CA and certificate work, and every mismatch fails
// with one line naming the endpoint and the reason.
#include <sys/stat.h>

#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/store/etcd_client.h"
#include "server/store/etcd_state_store.h"
#include "tests/server/store/store_backends.h"
#include "tests/testing/etcd_server.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/tls_certs.h"

namespace zshard::server {
namespace {

using ::testing::HasSubstr;
using zshard::testing::EtcdServer;
using zshard::testing::TlsFiles;

class EtcdTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!testing::StoreSkipReason(testing::StoreKind::kEtcd).empty()) return;
    dir_ = new zshard::testing::TempDir();
    for (const char* sub : {"tls", "other"}) {
      ASSERT_EQ(mkdir(dir_->File(sub).c_str(), 0700), 0);
    }
    auto files = zshard::testing::MakeTlsFiles(dir_->File("tls"));
    ASSERT_TRUE(files.ok()) << files.status();
    files_ = new TlsFiles(*files);
    // Another CA's set: a client trusting it cannot verify etcd.
    auto other = zshard::testing::MakeTlsFiles(dir_->File("other"));
    ASSERT_TRUE(other.ok()) << other.status();
    other_ = new TlsFiles(*other);
    zshard::testing::EtcdServerOptions options;
    options.tls = *files_;
    auto etcd = EtcdServer::Start(options);
    ASSERT_TRUE(etcd.ok()) << etcd.status();
    etcd_ = etcd->release();
  }
  static void TearDownTestSuite() {
    delete etcd_;
    delete files_;
    delete other_;
    delete dir_;
  }
  void SetUp() override {
    const std::string skip =
        testing::StoreSkipReason(testing::StoreKind::kEtcd);
    if (!skip.empty()) GTEST_SKIP() << skip;
    ASSERT_NE(etcd_, nullptr);
  }
  // A Range over the TLS etcd with `tls`.
  static absl::Status RangeWith(const HttpTlsOptions& tls,
                                const std::string& endpoint) {
    EtcdClientOptions o;
    o.endpoints = {endpoint};
    o.tls = tls;
    auto client = EtcdClient::Create(o);
    if (!client.ok()) return client.status();
    return (*client)->RangePrefix("/tls/").status();
  }

  static zshard::testing::TempDir* dir_;
  static TlsFiles* files_;
  static TlsFiles* other_;
  static EtcdServer* etcd_;
};

zshard::testing::TempDir* EtcdTlsTest::dir_ = nullptr;
TlsFiles* EtcdTlsTest::files_ = nullptr;
TlsFiles* EtcdTlsTest::other_ = nullptr;
EtcdServer* EtcdTlsTest::etcd_ = nullptr;

TEST_F(EtcdTlsTest, TheRightCaAndClientCertificateWork) {
  EtcdStateStoreOptions o;
  o.client.endpoints = {etcd_->endpoint()};
  o.client.tls = {files_->ca_cert, files_->client_cert, files_->client_key};
  o.prefix = "/tls/job";
  auto store = EtcdStateStore::Open(o);
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE((*store)->SaveJob("demo", "{}").ok());
  EXPECT_EQ((*store)->Load().value().job_name, "demo");
}

TEST_F(EtcdTlsTest, MismatchesNameTheEndpointAndTheReason) {
  const std::string e = etcd_->endpoint();
  absl::Status plain = RangeWith({}, e);
  EXPECT_EQ(plain.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(plain.message(),
            "etcd " + e +
                " unreachable: the server closed the connection without a "
                "response (does it want TLS? no tls ca was given)")
      << plain;
  absl::Status wrong_ca =
      RangeWith({other_->ca_cert, files_->client_cert, files_->client_key}, e);
  EXPECT_EQ(wrong_ca.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(wrong_ca.message()),
              HasSubstr("etcd " + e + " unreachable: tls handshake failed: "));
  EXPECT_THAT(std::string(wrong_ca.message()), HasSubstr("certificate"))
      << wrong_ca;
  // A client certificate of a CA etcd does not trust.
  absl::Status foreign =
      RangeWith({files_->ca_cert, other_->client_cert, other_->client_key}, e);
  EXPECT_EQ(foreign.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(foreign.message()),
              HasSubstr("etcd " + e + " unreachable: "))
      << foreign;
  absl::Status no_cert = RangeWith({files_->ca_cert, "", ""}, e);
  EXPECT_EQ(no_cert.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(no_cert.message()),
              HasSubstr("etcd " + e + " unreachable: "))
      << no_cert;
  // TLS to a plain etcd.
  absl::Status to_plain =
      RangeWith({files_->ca_cert, files_->client_cert, files_->client_key},
                testing::StoreLocation::EtcdEndpoint());
  EXPECT_EQ(to_plain.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(to_plain.message()),
              HasSubstr("unreachable: tls handshake failed: "))
      << to_plain;
  // Unusable files are refused before any connection.
  absl::Status missing = RangeWith({dir_->File("nowhere.pem"), "", ""}, e);
  EXPECT_EQ(missing.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(missing.message()),
              HasSubstr("tls ca file '" + dir_->File("nowhere.pem")));
}

}  // namespace
}  // namespace zshard::server
