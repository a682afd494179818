// Coordinator high availability on an etcd the test starts, with real
// coordinator and worker processes: several coordinators on one prefix
// (one leads, the others stand by: UNAVAILABLE naming the leader, health
// NOT_SERVING), kill -9 of the leader (a standby leads within the lease TTL
// + 2 s, loads the state, serves the rendezvous values set before, and the
// epochs go on without reuse), and a leader frozen with SIGSTOP past its
// lease (fenced, it comes back as a standby after SIGCONT), and a leader
// stopped with SIGTERM (it resigns: the standby leads at once).
#include <httplib.h>
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/file_io.h"
#include "common/net/leader_redirect.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/store/etcd_client.h"
#include "tests/integration/ha_probe.h"
#include "tests/integration/process_cluster.h"
#include "tests/testing/etcd_server.h"
#include "tests/testing/free_port.h"
#include "tests/testing/log_scan.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/wait_for.h"

namespace zshard::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

constexpr int kLeaseTtlS = 2;
constexpr char kPrefix[] = "/zshard/ha";
const char* const kServices[] = {
    "zshard.v1.WorkerService", "zshard.v1.RendezvousService",
    "zshard.v1.AdminService", "zshard.v1.DashboardService"};

struct Coordinator {
  std::string address;
  int metrics_port = 0;
  std::string log;
  std::unique_ptr<Subprocess> process;
};

class HaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (EtcdServer::Binary().empty()) {
      GTEST_SKIP() << "etcd is not installed (deploy/install-deps.sh)";
    }
    auto etcd = EtcdServer::Start();
    ASSERT_TRUE(etcd.ok()) << etcd.status();
    etcd_ = *std::move(etcd);
    server::EtcdClientOptions o;
    o.endpoints = {etcd_->endpoint()};
    client_ = server::EtcdClient::Create(o).value();
    TestJob job;
    job.lease_timeout_ms = 3000;
    nlohmann::json spec = nlohmann::json::parse(job.ToJson());
    // Workers here know one coordinator's address: when it is killed they
    // are gone for good, most members at once, and their silence alone
    // must judge them (the isolation rule off).
    spec["isolation_fraction"] = 1;
    ASSERT_TRUE(WriteFileAtomic(dir_.File("job.json"), spec.dump(2)).ok());
  }

  // Starts coordinator `name` on a free port of 127.0.0.1.
  Coordinator* Start(const std::string& name) {
    auto c = std::make_unique<Coordinator>();
    c->address = absl::StrCat("127.0.0.1:", PickFreePort());
    c->metrics_port = PickFreePort();
    c->log = dir_.File(name + ".log");
    Subprocess::Options options;
    options.argv = {ProcessCluster::Bin("zshard-coordinator"),
                    "--job",
                    dir_.File("job.json"),
                    "--listen",
                    c->address,
                    "--store",
                    absl::StrCat("etcd:", etcd_->endpoint(), kPrefix),
                    "--etcd-lease-ttl",
                    std::to_string(kLeaseTtlS),
                    "--http-listen",
                    absl::StrCat("127.0.0.1:", c->metrics_port)};
    options.stdout_path = dir_.File(name + ".out");
    options.stderr_path = c->log;
    auto process = Subprocess::Start(options);
    EXPECT_TRUE(process.ok()) << process.status();
    if (!process.ok()) return nullptr;
    c->process = *std::move(process);
    coordinators_.push_back(std::move(c));
    return coordinators_.back().get();
  }

  Subprocess* StartWorker(const std::string& name, const std::string& at) {
    Subprocess::Options options;
    options.argv = {ProcessCluster::Bin("zshard-worker"),
                    "--coordinator",
                    at,
                    "--name",
                    name,
                    "--labels",
                    "node=n-" + name};
    options.stderr_path = dir_.File("worker-" + name + ".log");
    options.stdout_path = options.stderr_path + ".out";
    auto process = Subprocess::Start(options);
    EXPECT_TRUE(process.ok()) << process.status();
    if (!process.ok()) return nullptr;
    workers_.push_back(*std::move(process));
    return workers_.back().get();
  }

  // The zshard_leader sample of c's /metrics (-1: none, or a /leader
  // readiness answer that disagrees: 200 on the leader, 503 on a standby).
  static int LeaderGauge(const Coordinator* c) {
    httplib::Client http("127.0.0.1", c->metrics_port);
    auto res = http.Get("/metrics");
    if (!res || res->status != 200) return -1;
    int gauge = -1;
    if (res->body.find("\nzshard_leader 1\n") != std::string::npos) gauge = 1;
    if (res->body.find("\nzshard_leader 0\n") != std::string::npos) gauge = 0;
    auto ready = http.Get("/leader");
    if (!ready || ready->status != (gauge == 1 ? 200 : 503)) return -1;
    return gauge;
  }

  static bool Leads(const Coordinator* c) {
    return HealthOf(c->address, net::kLeaderHealthService) == 1;
  }
  static bool StandsBy(const Coordinator* c) {
    return HealthOf(c->address, "") == 1 &&
           HealthOf(c->address, net::kLeaderHealthService) == 2;
  }

  // A standby's full answer: health and a worker RPC naming `leader`.
  static void ExpectStandby(const Coordinator* c, const Coordinator* leader) {
    EXPECT_EQ(HealthOf(c->address, ""), 1) << c->address;
    for (const char* service : kServices) {
      EXPECT_EQ(HealthOf(c->address, service), 2) << service;
    }
    RpcAnswer a = HeartbeatAnswer(c->address);
    EXPECT_EQ(a.code, grpc::StatusCode::UNAVAILABLE) << a.message;
    EXPECT_EQ(a.message,
              absl::StrCat("standby coordinator: the leader is ",
                           leader->address, ", its dashboard http://127.0.0.1:",
                           leader->metrics_port, "/"));
    EXPECT_EQ(a.leader, leader->address);
    // A server stream and another service answer the same.
    RpcAnswer w = WatchPlanAnswer(c->address);
    EXPECT_EQ(w.code, grpc::StatusCode::UNAVAILABLE) << w.message;
    EXPECT_EQ(w.leader, leader->address);
    auto status = ClusterStatus(c->address);
    EXPECT_EQ(status.status().code(), absl::StatusCode::kUnavailable);
    EXPECT_THAT(std::string(status.status().message()),
                HasSubstr("the leader is " + leader->address));
  }

  // The events stored under the prefix, oldest first.
  std::vector<nlohmann::json> StoredEvents() {
    std::vector<nlohmann::json> events;
    auto r = client_->RangePrefix(absl::StrCat(kPrefix, "/events/"));
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return events;
    for (const auto& kv : r->kvs) {
      events.push_back(nlohmann::json::parse(kv.value, nullptr, false));
    }
    return events;
  }

  // Status of `c` once its leader and standbys are `leader`, `standbys`.
  v1::GetClusterStatusResponse StatusNaming(const Coordinator* c,
                                            const std::string& leader,
                                            std::vector<std::string> standbys) {
    std::sort(standbys.begin(), standbys.end());
    v1::GetClusterStatusResponse last;
    bool named = WaitFor(
        [&] {
          auto s = ClusterStatus(c->address);
          if (!s.ok()) return false;
          last = *s;
          std::vector<std::string> got(s->standbys().begin(),
                                       s->standbys().end());
          std::sort(got.begin(), got.end());
          return s->leader() == leader && got == standbys;
        },
        5000);
    EXPECT_TRUE(named) << last.DebugString();
    return last;
  }

  TempDir dir_;
  std::unique_ptr<EtcdServer> etcd_;
  std::unique_ptr<server::EtcdClient> client_;
  std::vector<std::unique_ptr<Coordinator>> coordinators_;
  std::vector<std::unique_ptr<Subprocess>> workers_;
};

TEST_F(HaTest, ThreeCoordinatorsOneLeadsTheOthersStandByNamingIt) {
  Coordinator* a = Start("a");
  ASSERT_TRUE(WaitFor([&] { return Leads(a); }, 10000)) << ReadLog(a->log);
  Coordinator* b = Start("b");
  Coordinator* c = Start("c");
  ASSERT_TRUE(WaitFor([&] { return StandsBy(b) && StandsBy(c); }, 10000))
      << ReadLog(b->log);
  for (const char* service : kServices) {
    EXPECT_EQ(HealthOf(a->address, service), 1) << service;
  }
  // The leader serves: an unknown worker is its answer's subject.
  EXPECT_EQ(HeartbeatAnswer(a->address).code, grpc::StatusCode::NOT_FOUND);
  ExpectStandby(b, a);
  ExpectStandby(c, a);
  StatusNaming(a, a->address, {b->address, c->address});
  EXPECT_EQ(LeaderGauge(a), 1);
  EXPECT_EQ(LeaderGauge(b), 0);
  EXPECT_EQ(LeaderGauge(c), 0);
  // b logs that it stands by once its campaign has read who leads.
  EXPECT_TRUE(WaitFor(
      [&] {
        return LogContains(b->log, "standby: " + b->address + " stands by");
      },
      5000));
  // The leader recorded both standbys in the job's event log.
  int standby_events = 0;
  ASSERT_TRUE(WaitFor(
      [&] {
        standby_events = 0;
        for (const auto& e : StoredEvents()) {
          if (e.value("kind", "") == "standby") ++standby_events;
        }
        return standby_events == 2;
      },
      5000))
      << standby_events;
  for (auto& co : coordinators_) EXPECT_TRUE(co->process->Running());
}

TEST_F(HaTest, KilledLeaderIsReplacedWithinTheLeaseTtlAndTheJobGoesOn) {
  Coordinator* a = Start("a");
  ASSERT_TRUE(WaitFor([&] { return Leads(a); }, 10000)) << ReadLog(a->log);
  ASSERT_NE(StartWorker("w0", a->address), nullptr);
  ASSERT_NE(StartWorker("w1", a->address), nullptr);
  v1::GetClusterStatusResponse before;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto s = ClusterStatus(a->address);
        if (!s.ok()) return false;
        before = *s;
        return s->epoch() > 0 && s->pending_epoch() == 0 && s->world() == 2;
      },
      20000))
      << before.DebugString();
  Coordinator* b = Start("b");
  Coordinator* c = Start("c");
  ASSERT_TRUE(WaitFor([&] { return StandsBy(b) && StandsBy(c); }, 10000));
  // A member of the test's own (a spare: a world of 3 is no multiple of the
  // 2 instances) sets a rendezvous value in the committed epoch.
  auto probe = JoinAs(a->address, "probe");
  ASSERT_TRUE(probe.ok()) << probe.status();
  const std::string value("nccl\0id\xff", 8);
  ASSERT_TRUE(
      RendezvousSet(a->address, *probe, before.epoch(), "uid", value).ok());

  const int64_t killed_ms = WallTimeMs();
  a->process->Signal(SIGKILL);
  ASSERT_TRUE(a->process->Wait(5000).has_value());
  Coordinator* leader = nullptr;
  ASSERT_TRUE(WaitFor(
      [&] {
        for (Coordinator* co : {b, c}) {
          if (Leads(co)) leader = co;
        }
        return leader != nullptr;
      },
      (kLeaseTtlS + 2) * 1000 + 2000));
  const int64_t serving_ms = WallTimeMs() - killed_ms;
  Coordinator* standby = leader == b ? c : b;
  // The new leader's first store write: the first event stored after the
  // kill (its "restart", then "leader"). It records "leader" once it
  // serves, so its health can say SERVING before the event is stored.
  int64_t first_write_ms = -1;
  std::string leader_reason;
  EXPECT_TRUE(WaitFor(
      [&] {
        first_write_ms = -1;
        for (const auto& e : StoredEvents()) {
          const int64_t t = e.value("time_ms", int64_t{0});
          if (t < killed_ms) continue;
          if (first_write_ms < 0) first_write_ms = t - killed_ms;
          if (e.value("kind", "") == "leader") {
            leader_reason = e.value("reason", "");
            return true;
          }
        }
        return false;
      },
      5000))
      << "no leader event stored after the kill";
  EXPECT_THAT(leader_reason,
              HasSubstr(leader->address + " leads etcd prefix '" + kPrefix +
                        "' after " + a->address));
  std::printf(
      "failover (lease TTL %d s): kill -9 to the new leader's first store "
      "write %lld ms, to its health SERVING %lld ms\n",
      kLeaseTtlS, static_cast<long long>(first_write_ms),
      static_cast<long long>(serving_ms));
  EXPECT_GE(first_write_ms, 0);
  EXPECT_LE(first_write_ms, (kLeaseTtlS + 2) * 1000);

  // The new leader serves the state: the same epoch, the rendezvous value,
  // and it names the remaining standby.
  v1::GetClusterStatusResponse after =
      StatusNaming(leader, leader->address, {standby->address});
  EXPECT_EQ(after.epoch(), before.epoch());
  EXPECT_EQ(after.plan_hash(), before.plan_hash());
  auto got = RendezvousGet(leader->address, *probe, before.epoch(), "uid");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, value);
  EXPECT_TRUE(WaitFor(
      [&] {
        return HeartbeatAnswer(standby->address).leader == leader->address;
      },
      5000));
  ExpectStandby(standby, leader);

  // The epochs go on from the store: workers of the new leader form a new
  // world under a higher epoch.
  ASSERT_NE(StartWorker("w2", leader->address), nullptr);
  ASSERT_NE(StartWorker("w3", leader->address), nullptr);
  v1::GetClusterStatusResponse later;
  EXPECT_TRUE(WaitFor(
      [&] {
        auto s = ClusterStatus(leader->address);
        if (!s.ok()) return false;
        later = *s;
        return s->epoch() > before.epoch() && s->pending_epoch() == 0 &&
               s->world() == 2;
      },
      30000))
      << later.DebugString();
  std::vector<int64_t> epochs;
  auto keys = client_->RangePrefix(absl::StrCat(kPrefix, "/epochs/"));
  ASSERT_TRUE(keys.ok()) << keys.status();
  for (const auto& kv : keys->kvs) {
    epochs.push_back(std::stoll(kv.key.substr(kv.key.rfind('/') + 1)));
  }
  ASSERT_FALSE(epochs.empty());
  EXPECT_EQ(epochs.back(), later.epoch());
}

TEST_F(HaTest, FrozenLeaderIsFencedAndComesBackAsAStandby) {
  Coordinator* a = Start("a");
  ASSERT_TRUE(WaitFor([&] { return Leads(a); }, 10000)) << ReadLog(a->log);
  Coordinator* b = Start("b");
  ASSERT_TRUE(WaitFor([&] { return StandsBy(b); }, 10000));
  a->process->Signal(SIGSTOP);
  const bool took_over =
      WaitFor([&] { return Leads(b); }, (kLeaseTtlS + 2) * 1000 + 2000);
  const size_t events_at_takeover = StoredEvents().size();
  a->process->Signal(SIGCONT);
  ASSERT_TRUE(took_over) << ReadLog(b->log);
  // Back from its pause, a finds its lease gone and stands by, in process.
  ASSERT_TRUE(WaitFor([&] { return StandsBy(a); }, 10000)) << ReadLog(a->log);
  ExpectStandby(a, b);
  EXPECT_TRUE(a->process->Running());
  EXPECT_TRUE(LogContains(a->log, "deposed: " + a->address));
  EXPECT_EQ(LeaderGauge(a), 0);
  EXPECT_EQ(LeaderGauge(b), 1);
  StatusNaming(b, b->address, {a->address});
  // Nothing a wrote after its pause landed: every stored event since the
  // takeover is b's (a would have stored "pause", its ticker's gap).
  const std::vector<nlohmann::json> events = StoredEvents();
  ASSERT_GE(events.size(), events_at_takeover);
  for (const auto& e : events) {
    EXPECT_NE(e.value("kind", ""), "pause") << e.dump();
  }
  const bool tried = LogContains(a->log, "state store write failed");
  if (tried) {
    EXPECT_TRUE(LogContains(a->log,
                            "store write refused: this coordinator "
                            "is no longer the leader"));
  }
  std::printf("the frozen leader's write after SIGCONT: %s\n",
              tried ? "tried and refused (fenced)" : "not tried");
}

// SIGTERM resigns: the standby leads at once, not a lease TTL later.
TEST_F(HaTest, StoppedLeaderHandsOverAtOnce) {
  Coordinator* a = Start("a");
  ASSERT_TRUE(WaitFor([&] { return Leads(a); }, 10000)) << ReadLog(a->log);
  Coordinator* b = Start("b");
  ASSERT_TRUE(WaitFor([&] { return StandsBy(b); }, 10000));
  const int64_t stopped_ms = WallTimeMs();
  a->process->Signal(SIGTERM);
  EXPECT_EQ(a->process->Wait(5000), 0);
  ASSERT_TRUE(WaitFor([&] { return Leads(b); }, 5000)) << ReadLog(b->log);
  const int64_t took_ms = WallTimeMs() - stopped_ms;
  std::printf("hand-over after SIGTERM: %lld ms\n",
              static_cast<long long>(took_ms));
  EXPECT_LT(took_ms, kLeaseTtlS * 1000);
  StatusNaming(b, b->address, {});
}

}  // namespace
}  // namespace zshard::testing
