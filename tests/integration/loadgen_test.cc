// zshard-loadgen against a coordinator it starts itself (--job), as real
// processes: 2,000 simulated workers join and heartbeat; the JSON report is
// read with a real parser and must hold exactly the documented keys, every
// worker joined, none fenced, no heartbeat failed and few proposals, and
// the store writes counted (also with the coordinator on etcd). Given
// "standby,leader" (a fake standby naming a real coordinator), the
// simulated workers follow the standby to the leader.

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/common/net/fake_standby.h"
#include "tests/integration/process_cluster.h"
#include "tests/testing/etcd_server.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/temp_dir.h"

namespace zshard::testing {
namespace {

using nlohmann::json;

// Runs zshard-loadgen with `flags` and --output json; its parsed stdout.
absl::StatusOr<json> RunLoadgen(const TempDir& dir,
                                const std::vector<std::string>& flags) {
  std::vector<std::string> argv = {
      ProcessCluster::Bin("zshard-loadgen"), "--coordinator-bin",
      ProcessCluster::Bin("zshard-coordinator"), "--output", "json"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  Subprocess::Options options;
  options.argv = argv;
  options.stdout_path = dir.path() + "/loadgen.out";
  options.stderr_path = dir.path() + "/loadgen.err";
  auto child = Subprocess::Start(options);
  if (!child.ok()) return child.status();
  std::optional<int> rc = (*child)->Wait(240000);
  std::ifstream out(options.stdout_path);
  std::stringstream text;
  text << out.rdbuf();
  if (!rc.has_value() || *rc != 0) {
    std::ifstream err(options.stderr_path);
    std::stringstream why;
    why << err.rdbuf();
    return absl::InternalError("zshard-loadgen failed: " + why.str());
  }
  json report = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (report.is_discarded()) {
    return absl::InternalError("not json: " + text.str());
  }
  return report;
}

TEST(LoadgenTest, TwoThousandWorkersJoinAndHeartbeatWithoutFalseDeaths) {
  TempDir dir;
  auto report =
      RunLoadgen(dir, {"--job", "gpt2-small", "--workers", "2000",
                       "--heartbeat-ms", "1000", "--lease-ms", "20000",
                       "--warmup-s", "4", "--duration-s", "3"});
  ASSERT_TRUE(report.ok()) << report.status();
  const json& r = *report;
  std::set<std::string> keys;
  for (const auto& [k, v] : r.items()) keys.insert(k);
  const std::set<std::string> expected = {"workers",
                                          "joined",
                                          "join_seconds",
                                          "heartbeats_ok",
                                          "heartbeats_failed",
                                          "p50_ms",
                                          "p99_ms",
                                          "warmup_p99_ms",
                                          "fenced",
                                          "proposals",
                                          "coordinator_cpu_percent",
                                          "loadgen_cpu_percent",
                                          "store_changes",
                                          "store_transactions"};
  EXPECT_EQ(keys, expected) << r.dump();
  for (const std::string& k : expected) {
    EXPECT_TRUE(r[k].is_number()) << k << " in " << r.dump();
  }
  EXPECT_EQ(r["workers"], 2000);
  EXPECT_EQ(r["joined"], 2000);
  EXPECT_EQ(r["fenced"], 0);
  EXPECT_EQ(r["heartbeats_failed"], 0);
  // 3 s of 1 s beats from 2,000 workers.
  EXPECT_EQ(r["heartbeats_ok"], 6000);
  EXPECT_GE(r["proposals"].get<int64_t>(), 1);
  EXPECT_GE(r["coordinator_cpu_percent"].get<double>(), 0);
  EXPECT_LE(r["p50_ms"].get<double>(), r["p99_ms"].get<double>());
  // Every join and leave is a change written; group commit writes several
  // in one transaction.
  EXPECT_GE(r["store_changes"].get<int64_t>(), 4000) << r.dump();
  EXPECT_GE(r["store_transactions"].get<int64_t>(), 1);
  EXPECT_LE(r["store_transactions"], r["store_changes"]);
}

// The coordinator on etcd (a single-member etcd the test starts): the same
// load, no false deaths, and the store writes counted.
TEST(LoadgenTest, WorkersThroughAnEtcdBackedCoordinator) {
  if (EtcdServer::Binary().empty()) {
    GTEST_SKIP() << "etcd is not installed (deploy/install-deps.sh)";
  }
  auto etcd = EtcdServer::Start();
  ASSERT_TRUE(etcd.ok()) << etcd.status();
  TempDir dir;
  auto report = RunLoadgen(
      dir, {"--job", "gpt2-small", "--workers", "300", "--heartbeat-ms", "1000",
            "--lease-ms", "20000", "--warmup-s", "3", "--duration-s", "3",
            "--store", "etcd:" + (*etcd)->endpoint() + "/zshard/lg"});
  ASSERT_TRUE(report.ok()) << report.status();
  const json& r = *report;
  EXPECT_EQ(r["joined"], 300);
  EXPECT_EQ(r["fenced"], 0) << r.dump();
  EXPECT_EQ(r["heartbeats_failed"], 0) << r.dump();
  EXPECT_EQ(r["heartbeats_ok"], 900) << r.dump();
  EXPECT_GE(r["proposals"].get<int64_t>(), 1) << r.dump();
  EXPECT_GE(r["store_changes"].get<int64_t>(), 600) << r.dump();
  EXPECT_GE(r["store_transactions"].get<int64_t>(), 1) << r.dump();
}

TEST(LoadgenTest, KilledWorkersAreNotCountedAsFenced) {
  TempDir dir;
  auto report =
      RunLoadgen(dir, {"--job", "gpt2-small", "--workers", "64", "--kill", "8",
                       "--heartbeat-ms", "200", "--lease-ms", "1000",
                       "--warmup-s", "2", "--duration-s", "3"});
  ASSERT_TRUE(report.ok()) << report.status();
  const json& r = *report;
  EXPECT_EQ(r["joined"], 64);
  EXPECT_EQ(r["fenced"], 0) << r.dump();
  EXPECT_EQ(r["heartbeats_failed"], 0) << r.dump();
  // 56 survivors, 15 beats each in 3 s.
  EXPECT_EQ(r["heartbeats_ok"], 56 * 15) << r.dump();
  // The 8 silent ones' leases expire: at least one more proposal.
  EXPECT_GE(r["proposals"].get<int64_t>(), 2) << r.dump();
}

TEST(LoadgenTest, SimulatedWorkersFollowAStandbyToTheLeader) {
  ProcessCluster cluster;
  TestJob job;
  job.instances = 1;
  job.min_world = 1;
  job.max_world = 64;
  job.lease_timeout_ms = 5000;
  ASSERT_TRUE(cluster.StartCoordinator(job).ok());
  auto standby = FakeStandby::Start(cluster.address());
  ASSERT_TRUE(standby.ok()) << standby.status();
  TempDir dir;
  auto report = RunLoadgen(
      dir, {"--coordinator",
            absl::StrCat((*standby)->address(), ",", cluster.address()),
            "--workers", "32", "--connections", "2", "--heartbeat-ms", "200",
            "--warmup-s", "1", "--duration-s", "2"});
  ASSERT_TRUE(report.ok()) << report.status();
  const json& r = *report;
  EXPECT_EQ(r["joined"], 32) << r.dump();
  EXPECT_EQ(r["fenced"], 0) << r.dump();
  EXPECT_EQ(r["heartbeats_failed"], 0) << r.dump();
  // 2 s of 200 ms beats from 32 workers, all answered by the leader.
  EXPECT_EQ(r["heartbeats_ok"], 32 * 10) << r.dump();
  // The dashboard was reached through the standby too (-1 otherwise).
  EXPECT_GE(r["proposals"].get<int64_t>(), 1) << r.dump();
  // Each connection met the standby (its first call) before the leader.
  EXPECT_GE((*standby)->calls(), 2);
}

TEST(LoadgenTest, RefusesBadFlagsWithOneLine) {
  Subprocess::Options options;
  TempDir dir;
  options.argv = {ProcessCluster::Bin("zshard-loadgen"), "--workers", "10"};
  options.stderr_path = dir.path() + "/err";
  options.stdout_path = dir.path() + "/out";
  auto child = Subprocess::Start(options);
  ASSERT_TRUE(child.ok()) << child.status();
  EXPECT_EQ((*child)->Wait(30000), 2);
  std::ifstream err(options.stderr_path);
  std::string line;
  std::getline(err, line);
  EXPECT_NE(line.find("--coordinator HOST:PORT or --job"), std::string::npos)
      << line;
  options.argv = {ProcessCluster::Bin("zshard-loadgen"), "--coordinator",
                  "a:1,,b:2"};
  child = Subprocess::Start(options);
  ASSERT_TRUE(child.ok()) << child.status();
  EXPECT_EQ((*child)->Wait(30000), 2);
  std::ifstream err2(options.stderr_path);
  std::getline(err2, line);
  EXPECT_NE(line.find("coordinator list 'a:1,,b:2' has an empty entry"),
            std::string::npos)
      << line;
}

}  // namespace
}  // namespace zshard::testing
