// Network faults with coordinator high availability: three coordinators
// (hosts 0..2) on one etcd prefix, five workers (hosts 3..7, W = 4 in
// I = 2 and a spare) that know all three, and an etcd cluster of three
// members (hosts 8..10), each host a network namespace of its own. The
// leader is cut off, either from every worker (it still reaches etcd: it
// hears from no member for a lease and gives its place up, so a standby
// that reaches them leads) or from etcd (its lease ends and a standby
// leads). Either way a standby leads within 15 s, no one is declared dead,
// and the job ends with the reference masters. Needs root, iproute2 and
// etcd (skipped otherwise).

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/net/leader_redirect.h"
#include "gtest/gtest.h"
#include "tests/integration/elastic_cluster.h"
#include "tests/integration/elastic_expect.h"
#include "tests/integration/ha_probe.h"
#include "tests/testing/etcd_server.h"
#include "tests/testing/net_hosts.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/wait_for.h"

namespace zshard::testing {
namespace {

constexpr int kCoordinators = 3;
constexpr int kWorkers = 5;
constexpr int kEtcdMembers = 3;
constexpr int kFirstEtcdHost = kCoordinators + kWorkers;
constexpr char kPrefix[] = "/zshard-netha";

// Worker w<i> runs on host kCoordinators + i.
int HostOf(const std::string& worker) {
  return kCoordinators + std::stoi(worker.substr(1));
}

enum class Cut { kFromWorkers, kFromEtcd };

class NetworkHaTest : public ::testing::TestWithParam<Cut> {
 protected:
  void SetUp() override {
    const std::string why = NetHosts::Unavailable();
    if (!why.empty()) GTEST_SKIP() << "NetHosts unavailable: " << why;
    if (EtcdServer::Binary().empty()) {
      GTEST_SKIP() << "etcd is not installed (deploy/install-deps.sh)";
    }
    auto net = NetHosts::Create(kCoordinators + kWorkers + kEtcdMembers);
    ASSERT_TRUE(net.ok()) << net.status();
    net_ = *std::move(net);
    EtcdServerOptions o;
    for (int i = 0; i < kEtcdMembers; ++i) {
      const int host = kFirstEtcdHost + i;
      o.placements.push_back({net_->Command(host), net_->Address(host)});
    }
    auto etcd = EtcdCluster::Start(3, o);
    ASSERT_TRUE(etcd.ok()) << etcd.status();
    etcd_ = *std::move(etcd);
  }

  void TearDown() override {
    for (std::unique_ptr<Subprocess>& c : coordinators_) {
      if (c != nullptr) c->Kill();
    }
  }

  std::string AddressOf(int c) const {
    return absl::StrCat(net_->Address(c), ":7070");
  }

  absl::Status Launch(int c, const std::string& job_path) {
    Subprocess::Options o;
    o.argv = net_->Command(c);
    for (const std::string& arg :
         {ProcessCluster::Bin("zshard-coordinator"), std::string("--job"),
          job_path, std::string("--listen"), AddressOf(c),
          std::string("--advertise"), AddressOf(c), std::string("--store"),
          absl::StrCat("etcd:", absl::StrJoin(etcd_->endpoints(), ","),
                       kPrefix),
          std::string("--etcd-lease-ttl"), std::string("2")}) {
      o.argv.push_back(arg);
    }
    o.stderr_path = run_->File(absl::StrCat("coordinator-c", c, ".log"));
    o.stdout_path = o.stderr_path + ".out";
    auto process = Subprocess::Start(o);
    if (!process.ok()) return process.status();
    coordinators_[static_cast<size_t>(c)] = *std::move(process);
    return absl::OkStatus();
  }

  bool Leads(int c) const {
    return HealthOf(AddressOf(c), net::kLeaderHealthService) == 1;
  }
  bool StandsBy(int c) const {
    return HealthOf(AddressOf(c), "") == 1 &&
           HealthOf(AddressOf(c), net::kLeaderHealthService) == 2;
  }

  std::unique_ptr<NetHosts> net_;
  std::unique_ptr<EtcdCluster> etcd_;
  std::unique_ptr<ElasticRun> run_;
  std::vector<std::unique_ptr<Subprocess>> coordinators_ =
      std::vector<std::unique_ptr<Subprocess>>(kCoordinators);
};

TEST_P(NetworkHaTest, CutOffLeaderGivesWayToAStandby) {
  ElasticJob job;
  job.name = "netha";
  job.instances = 2;
  job.min_world = 4;
  job.max_world = 4;
  job.steps = 200;
  job.lease_timeout_ms = 1500;
  run_ = std::make_unique<ElasticRun>(job);
  auto path = run_->WriteJobFile();
  ASSERT_TRUE(path.ok()) << path.status();
  // c0 first, so that it leads.
  ASSERT_TRUE(Launch(0, *path).ok());
  ASSERT_TRUE(WaitFor([&] { return Leads(0); }, 15000)) << run_->Diagnostics();
  ASSERT_TRUE(Launch(1, *path).ok());
  ASSERT_TRUE(Launch(2, *path).ok());
  ASSERT_TRUE(WaitFor([&] { return StandsBy(1) && StandsBy(2); }, 15000))
      << run_->Diagnostics();
  std::vector<std::string> addresses;
  for (int c = 0; c < kCoordinators; ++c) addresses.push_back(AddressOf(c));
  run_->FollowCoordinators(addresses);
  const std::vector<std::string> names = WorkerNames(kWorkers);
  for (const std::string& name : names) {
    run_->cluster().PlaceWorker(
        name, {net_->Command(HostOf(name)), net_->Address(HostOf(name))});
  }
  ASSERT_TRUE(run_->StartWorkers(names).ok());
  auto before = run_->WaitForRanksAtStep(4, 10, kStartMs);
  ASSERT_TRUE(before.ok()) << before.status() << "\n" << run_->Diagnostics();
  const int64_t seq = LastSeq(run_->Events());

  const int64_t cut_ms = WallMs();
  if (GetParam() == Cut::kFromWorkers) {
    for (const std::string& name : names) {
      ASSERT_TRUE(net_->Cut(0, HostOf(name)).ok());
    }
  } else {
    for (int i = 0; i < kEtcdMembers; ++i) {
      ASSERT_TRUE(net_->Cut(0, kFirstEtcdHost + i).ok());
    }
  }
  int leader = -1;
  WaitFor(
      [&] {
        for (int c = 1; c < kCoordinators; ++c) {
          if (Leads(c)) leader = c;
        }
        return leader > 0;
      },
      15000);
  const int64_t led_ms = WallMs() - cut_ms;
  ASSERT_GT(leader, 0) << "no standby leads\n" << run_->Diagnostics();
  std::printf("leader c0 cut from %s: c%d leads after %lld ms\n",
              GetParam() == Cut::kFromWorkers ? "every worker" : "etcd", leader,
              static_cast<long long>(led_ms));
  EXPECT_LT(led_ms, 15000);

  auto finished = run_->WaitForEvent("finished", seq, kExitMs);
  ASSERT_TRUE(finished.ok()) << finished.status() << "\n"
                             << run_->Diagnostics();
  ExpectExitedZero(*run_, names);
  const std::vector<v1::Event> events = run_->Events();
  EXPECT_TRUE(EventsOfKind(events, "dead", seq).empty())
      << DescribeEvents(events);
  if (GetParam() == Cut::kFromWorkers) {
    EXPECT_FALSE(EventsOfKind(events, "resigned", seq).empty())
        << DescribeEvents(events);
  }
  ExpectReferenceMasters(*run_, 4);
}

INSTANTIATE_TEST_SUITE_P(Faults, NetworkHaTest,
                         ::testing::Values(Cut::kFromWorkers, Cut::kFromEtcd),
                         [](const ::testing::TestParamInfo<Cut>& info) {
                           return info.param == Cut::kFromWorkers
                                      ? std::string("FromWorkers")
                                      : std::string("FromEtcd");
                         });

}  // namespace
}  // namespace zshard::testing
