// The coordinator on each store with real processes: a job runs, the
// coordinator is killed with SIGKILL and restarted on the same store (the
// same etcd prefix), and the job goes on in the same epoch with the same
// members and ranks and completes. And what zshard-coordinator refuses at
// start about --store (exit status 2, one line): a malformed spec, an empty
// prefix, an unreachable etcd, a TLS mismatch; a coordinator on an etcd
// with TLS and client certificates; a second coordinator on a led prefix
// stands by; and a coordinator whose election lease is revoked steps down
// and leads again with a new key (ha_integration_test has the failovers).
#include <signal.h>
#include <sys/stat.h>

#include <string>
#include <vector>

#include "common/net/leader_redirect.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/store/etcd_client.h"
#include "tests/integration/ha_probe.h"
#include "tests/integration/process_cluster.h"
#include "tests/testing/etcd_server.h"
#include "tests/testing/free_port.h"
#include "tests/testing/log_scan.h"
#include "tests/testing/tls_certs.h"
#include "tests/testing/wait_for.h"

namespace zshard::testing {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

enum class Store { kSqlite, kEtcd };

class StoreRestartTest : public ::testing::TestWithParam<Store> {
 protected:
  void SetUp() override {
    if (GetParam() == Store::kEtcd) {
      if (EtcdServer::Binary().empty()) {
        GTEST_SKIP() << "etcd is not installed (deploy/install-deps.sh)";
      }
      auto etcd = EtcdServer::Start();
      ASSERT_TRUE(etcd.ok()) << etcd.status();
      etcd_ = *std::move(etcd);
      // A 2 s election lease: the restart after kill -9 waits it out.
      flags_ = {"--store", "etcd:" + etcd_->endpoint() + "/zshard/itest",
                "--etcd-lease-ttl", "2"};
    }
  }

  std::unique_ptr<EtcdServer> etcd_;
  std::vector<std::string> flags_;
  ProcessCluster cluster_;
};

TEST_P(StoreRestartTest, KilledCoordinatorRestartsOnItsStoreAndTheJobEnds) {
  TestJob job;
  job.steps = 400;  // 8 s at 20 ms a step: the restart happens mid-job
  ASSERT_TRUE(cluster_.StartCoordinator(job, flags_).ok());
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(cluster_.StartWorker("w" + std::to_string(i)).ok());
  }
  auto before = cluster_.WaitForStatus(
      [](const json& s) {
        return IsStableWorld(s, 4, 0) && FindMember(s, "w0")["step"] > 5;
      },
      20000);
  ASSERT_TRUE(before.ok()) << before.status();

  cluster_.coordinator()->Signal(SIGKILL);
  ASSERT_TRUE(cluster_.coordinator()->Wait(5000).has_value());
  absl::Status restarted = cluster_.RestartCoordinator();
  ASSERT_TRUE(restarted.ok()) << restarted;
  auto after = cluster_.WaitForStatus(
      [](const json& s) { return IsStableWorld(s, 4, 0); }, 10000);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ((*after)["epoch"], (*before)["epoch"]);
  EXPECT_EQ((*after)["plan_hash"], (*before)["plan_hash"]);
  for (const json& m : (*before)["members"]) {
    json now = FindMember(*after, m["name"].get<std::string>());
    ASSERT_FALSE(now.is_null()) << m["name"];
    EXPECT_EQ(now["worker_id"], m["worker_id"]);
    EXPECT_EQ(now["rank"], m["rank"]);
  }
  // The job completes: every worker steps to the end and exits 0.
  for (int i = 0; i < 4; ++i) {
    const std::string name = "w" + std::to_string(i);
    EXPECT_EQ(cluster_.worker(name)->Wait(30000), 0)
        << ReadLog(cluster_.WorkerLog(name));
  }
  auto events = cluster_.RunCtl({"events"});
  EXPECT_EQ(events, 0);
  EXPECT_TRUE(LogContains(cluster_.dir().File("ctl.out"), "restart"));
}

INSTANTIATE_TEST_SUITE_P(Stores, StoreRestartTest,
                         ::testing::Values(Store::kSqlite, Store::kEtcd),
                         [](const ::testing::TestParamInfo<Store>& info) {
                           return info.param == Store::kSqlite ? "Sqlite"
                                                               : "Etcd";
                         });

// One coordinator per etcd prefix: it campaigns at start and leads while
// it serves.
class EtcdCoordinatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (EtcdServer::Binary().empty()) {
      GTEST_SKIP() << "etcd is not installed (deploy/install-deps.sh)";
    }
    auto etcd = EtcdServer::Start();
    ASSERT_TRUE(etcd.ok()) << etcd.status();
    etcd_ = *std::move(etcd);
    store_ = "etcd:" + etcd_->endpoint() + "/zshard/itest";
    ASSERT_TRUE(cluster_.StartCoordinator(TestJob(), {"--store", store_}).ok());
  }

  std::unique_ptr<EtcdServer> etcd_;
  std::string store_;
  ProcessCluster cluster_;
};

TEST_F(EtcdCoordinatorTest, SecondCoordinatorOnALedPrefixStandsBy) {
  const std::string address = "127.0.0.1:" + std::to_string(PickFreePort());
  Subprocess::Options options;
  options.argv = {ProcessCluster::Bin("zshard-coordinator"),
                  "--job",
                  cluster_.dir().File("job.json"),
                  "--listen",
                  address,
                  "--store",
                  store_,
                  "--etcd-lease-ttl",
                  "2"};
  options.stdout_path = cluster_.dir().File("second.out");
  options.stderr_path = cluster_.dir().File("second.err");
  auto second = Subprocess::Start(options);
  ASSERT_TRUE(second.ok());
  // It serves as a standby: every RPC is UNAVAILABLE naming the leader. It
  // answers before its campaign has read who leads: from its first answer
  // on it names the leader or none, never itself.
  std::vector<std::string> named;
  ASSERT_TRUE(WaitFor(
      [&] {
        RpcAnswer a = HeartbeatAnswer(address);
        if (!a.leader.empty()) named.push_back(a.leader);
        return a.leader == cluster_.address();
      },
      10000, 1))
      << ReadLog(cluster_.dir().File("second.err"));
  EXPECT_THAT(named, ::testing::Each(cluster_.address()));
  EXPECT_EQ(HealthOf(address, ""), 1);
  RpcAnswer answer = HeartbeatAnswer(address);
  EXPECT_EQ(answer.code, grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(answer.message,
            "standby coordinator: the leader is " + cluster_.address());
  EXPECT_EQ(answer.leader, cluster_.address())
      << ReadLog(cluster_.dir().File("second.err"))
      << ReadLog(cluster_.dir().File("coordinator-0.log"));
  EXPECT_EQ(HealthOf(address, net::kLeaderHealthService), 2);
  EXPECT_EQ(HealthOf(cluster_.address(), net::kLeaderHealthService), 1);
  EXPECT_TRUE((*second)->Running());
  EXPECT_TRUE(cluster_.Status().ok());  // the leader serves on
}

TEST_F(EtcdCoordinatorTest, RevokedLeaseMakesTheCoordinatorStepDownAndLead) {
  server::EtcdClientOptions o;
  o.endpoints = {etcd_->endpoint()};
  auto client = server::EtcdClient::Create(o).value();
  auto keys = client->RangePrefix("/zshard/itest/election/");
  ASSERT_TRUE(keys.ok()) << keys.status();
  ASSERT_EQ(keys->kvs.size(), 1u);
  ASSERT_TRUE(client->Revoke(keys->kvs[0].lease).ok());
  // Its writes were fenced by the revoked key: it steps down and, the only
  // candidate, campaigns again and leads with a new key, in process.
  const std::string log = cluster_.dir().File("coordinator-0.log");
  EXPECT_TRUE(WaitFor(
      [&] { return LogContains(log, "deposed: " + cluster_.address()); }, 5000))
      << ReadLog(log);
  EXPECT_TRUE(WaitFor(
      [&] {
        auto now = client->RangePrefix("/zshard/itest/election/");
        return now.ok() && now->kvs.size() == 1 &&
               now->kvs[0].lease != keys->kvs[0].lease &&
               HealthOf(cluster_.address(), net::kLeaderHealthService) == 1;
      },
      5000));
  EXPECT_TRUE(cluster_.coordinator()->Running());
  // It writes again: a worker joins and is stored.
  ASSERT_TRUE(cluster_.StartWorker("w0").ok());
  EXPECT_TRUE(WaitFor(
      [&] {
        auto members = client->RangePrefix("/zshard/itest/members/");
        return members.ok() && members->kvs.size() == 1;
      },
      10000));
}

// etcd killed with SIGKILL and restarted under a running job: the
// coordinator rides it out (it keeps leading), the changes after it are
// stored, and a coordinator restarted with kill -9 finds them.
TEST_F(EtcdCoordinatorTest, EtcdRestartUnderARunningJobIsRiddenOut) {
  for (const char* name : {"w0", "w1"}) {
    ASSERT_TRUE(cluster_.StartWorker(name).ok());
  }
  auto two = cluster_.WaitForStatus(
      [](const json& s) { return IsStableWorld(s, 2, 0); }, 20000);
  ASSERT_TRUE(two.ok()) << two.status();
  etcd_->Kill();
  ASSERT_TRUE(etcd_->Restart().ok());
  for (const char* name : {"w2", "w3"}) {
    ASSERT_TRUE(cluster_.StartWorker(name).ok());
  }
  auto four = cluster_.WaitForStatus(
      [](const json& s) { return IsStableWorld(s, 4, 0); }, 20000);
  ASSERT_TRUE(four.ok()) << four.status();
  EXPECT_GT((*four)["epoch"], (*two)["epoch"]);
  EXPECT_TRUE(cluster_.coordinator()->Running());
  cluster_.coordinator()->Signal(SIGKILL);
  ASSERT_TRUE(cluster_.coordinator()->Wait(5000).has_value());
  absl::Status restarted = cluster_.RestartCoordinator();
  ASSERT_TRUE(restarted.ok()) << restarted;
  auto after = cluster_.WaitForStatus(
      [](const json& s) { return IsStableWorld(s, 4, 0); }, 10000);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ((*after)["epoch"], (*four)["epoch"]);
  EXPECT_EQ((*after)["plan_hash"], (*four)["plan_hash"]);
}

// Runs zshard-coordinator with `flags` (after --job and --listen) and
// expects exit status 2 with one line on stderr containing `want`.
void ExpectRefused(const std::vector<std::string>& flags,
                   const std::string& want) {
  TempDir dir;
  FILE* f = std::fopen(dir.File("job.json").c_str(), "w");
  ASSERT_NE(f, nullptr);
  const std::string text = TestJob().ToJson();
  std::fwrite(text.data(), 1, text.size(), f);
  std::fclose(f);
  Subprocess::Options options;
  options.argv = {ProcessCluster::Bin("zshard-coordinator"), "--job",
                  dir.File("job.json"), "--listen", "127.0.0.1:0"};
  options.argv.insert(options.argv.end(), flags.begin(), flags.end());
  options.stdout_path = dir.File("out");
  options.stderr_path = dir.File("err");
  auto child = Subprocess::Start(options);
  ASSERT_TRUE(child.ok());
  EXPECT_EQ((*child)->Wait(20000), 2) << want;
  const std::string err = ReadLog(dir.File("err"));
  EXPECT_THAT(err, HasSubstr(want));
  EXPECT_EQ(err.find('\n'), err.size() - 1) << err;
  // It never served.
  EXPECT_THAT(ReadLog(dir.File("out")), ::testing::Not(HasSubstr("listening")));
}

TEST(StoreFlagTest, BadStoresExitTwoWithOneLine) {
  const std::string dead = "127.0.0.1:" + std::to_string(PickFreePort());
  ExpectRefused({"--store", "etcd:" + dead + "/zshard/job"},
                "cannot open the store: etcd " + dead +
                    " unreachable: connection refused");
  ExpectRefused({"--store", "etcd:127.0.0.1:2379/"},
                "the etcd prefix is empty");
  ExpectRefused({"--store", "etcd:127.0.0.1/zshard"}, "is not HOST:PORT");
  ExpectRefused({"--store", "zookeeper:h:1/p"}, "must be sqlite:DIR or etcd:");
  ExpectRefused({"--store", "sqlite:/tmp/x", "--etcd-ca", "ca.pem"},
                "flag --etcd-ca needs --store etcd:");
  ExpectRefused({"--store", "etcd:127.0.0.1:2379/p", "--etcd-cert", "c.pem"},
                "flags --etcd-cert and --etcd-key go together");
  ExpectRefused({"--store", "etcd:127.0.0.1:2379/p", "--etcd-lease-ttl", "1"},
                "--etcd-lease-ttl must be >= 2");
  ExpectRefused({"--state-dir", "/tmp/x", "--etcd-lease-ttl", "9"},
                "flag --etcd-lease-ttl needs --store etcd:");
}

// A coordinator on an etcd that serves TLS and requires client
// certificates: it serves with the right files, and refuses to start
// without TLS or with a CA that does not match.
TEST(EtcdTlsCoordinatorTest, ServesWithTheRightFilesAndRefusesAMismatch) {
  if (EtcdServer::Binary().empty()) {
    GTEST_SKIP() << "etcd is not installed (deploy/install-deps.sh)";
  }
  TempDir dir;
  ASSERT_EQ(mkdir(dir.File("tls").c_str(), 0700), 0);
  ASSERT_EQ(mkdir(dir.File("other").c_str(), 0700), 0);
  auto files = MakeTlsFiles(dir.File("tls"));
  ASSERT_TRUE(files.ok()) << files.status();
  auto other = MakeTlsFiles(dir.File("other"));
  ASSERT_TRUE(other.ok()) << other.status();
  EtcdServerOptions options;
  options.tls = *files;
  auto etcd = EtcdServer::Start(options);
  ASSERT_TRUE(etcd.ok()) << etcd.status();
  const std::string store = "etcd:" + (*etcd)->endpoint() + "/zshard/tls";
  ExpectRefused({"--store", store},
                "unreachable: the server closed the connection without a "
                "response (does it want TLS? no tls ca was given)");
  ExpectRefused({"--store", store, "--etcd-ca", other->ca_cert, "--etcd-cert",
                 files->client_cert, "--etcd-key", files->client_key},
                "unreachable: tls handshake failed: ");
  ProcessCluster cluster;
  absl::Status started = cluster.StartCoordinator(
      TestJob(), {"--store", store, "--etcd-ca", files->ca_cert, "--etcd-cert",
                  files->client_cert, "--etcd-key", files->client_key});
  ASSERT_TRUE(started.ok()) << started;
  ASSERT_TRUE(cluster.StartWorker("w0").ok());
  ASSERT_TRUE(cluster.StartWorker("w1").ok());
  auto stable = cluster.WaitForStatus(
      [](const json& s) { return IsStableWorld(s, 2, 0); }, 20000);
  EXPECT_TRUE(stable.ok()) << stable.status();
}

}  // namespace
}  // namespace zshard::testing
