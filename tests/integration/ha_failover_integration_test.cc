// Failover under training (issue 16's "Tests"): a local etcd cluster of 3
// members on loopback, 3 coordinators on one prefix of it (lease TTL 2 s),
// and a training job of real processes (I = 2, W = 4 and a spare) whose
// workers follow the leader among all three addresses. While it trains the
// leader is killed with SIGKILL 5 times at seeded random steps: in steady
// training, right after a proposal (mid-transition), with one etcd member
// down, right after a re-shard's commit, and in steady training again; each
// killed coordinator comes back on its address as a standby. One etcd member
// is killed and restarted. The final masters equal the reference of the
// run's own world history, no worker but the two the test kills is declared
// dead, the committed epochs strictly increase, the re-shard committed
// before a kill becomes stable under its epoch, and each failover (kill to
// the new leader's health SERVING) takes at most the lease TTL + 2 s.
//
// ZSHARD_HA_SEED=N replays a run (the seed is printed).
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <regex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/net/leader_redirect.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/store/etcd_client.h"
#include "tests/integration/elastic_cluster.h"
#include "tests/integration/elastic_expect.h"
#include "tests/integration/ha_probe.h"
#include "tests/testing/etcd_server.h"
#include "tests/testing/free_port.h"
#include "tests/testing/log_scan.h"
#include "tests/testing/wait_for.h"

namespace zshard::testing {
namespace {

constexpr int kLeaseTtlS = 2;
constexpr int64_t kFailoverBoundMs = (kLeaseTtlS + 2) * 1000;
constexpr char kPrefix[] = "/zshard/ha-train";

int64_t SteadyMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// One coordinator process slot: a fixed address, restarted on it.
struct Coordinator {
  std::string name;
  std::string address;
  int starts = 0;
  std::unique_ptr<Subprocess> process;
};

// What one failover measured.
struct Failover {
  std::string when;
  std::string killed;
  std::string successor;
  // Wall clock of the kill (events carry wall-clock times).
  int64_t killed_wall_ms = 0;
  int64_t serving_ms = 0;
};

class HaFailoverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (EtcdServer::Binary().empty()) {
      GTEST_SKIP() << "etcd is not installed (deploy/install-deps.sh)";
    }
    const char* env = std::getenv("ZSHARD_HA_SEED");
    seed_ = env != nullptr ? std::strtoull(env, nullptr, 10)
                           : std::random_device()();
    std::printf("ha failover seed %llu (ZSHARD_HA_SEED=%llu replays it)\n",
                static_cast<unsigned long long>(seed_),
                static_cast<unsigned long long>(seed_));
    rng_.seed(seed_);
    auto etcd = EtcdCluster::Start(3);
    ASSERT_TRUE(etcd.ok()) << etcd.status();
    etcd_ = *std::move(etcd);
    server::EtcdClientOptions o;
    o.endpoints = etcd_->endpoints();
    auto client = server::EtcdClient::Create(o);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
  }

  // Whether the store holds an event of `e`'s kind and reason: the
  // leader's write of it is durable.
  bool Stored(const v1::Event& e) {
    auto r = client_->RangePrefix(absl::StrCat(kPrefix, "/events/"));
    if (!r.ok()) return false;
    for (const auto& kv : r->kvs) {
      auto j = nlohmann::json::parse(kv.value, nullptr, false);
      if (j.is_object() && j.value("kind", "") == e.kind() &&
          j.value("reason", "") == e.reason()) {
        return true;
      }
    }
    return false;
  }

  // Starts (or restarts) coordinator `c` on its address.
  absl::Status Launch(Coordinator& c) {
    Subprocess::Options o;
    o.argv = {
        ProcessCluster::Bin("zshard-coordinator"),
        "--job",
        job_path_,
        "--listen",
        c.address,
        "--advertise",
        c.address,
        "--store",
        absl::StrCat("etcd:", absl::StrJoin(etcd_->endpoints(), ","), kPrefix),
        "--etcd-lease-ttl",
        std::to_string(kLeaseTtlS)};
    // coordinator-*.log: ElasticRun::Diagnostics shows them.
    o.stderr_path =
        run_->File(absl::StrCat("coordinator-", c.name, "-", c.starts, ".log"));
    o.stdout_path = o.stderr_path + ".out";
    ++c.starts;
    auto process = Subprocess::Start(o);
    if (!process.ok()) return process.status();
    c.process = *std::move(process);
    return absl::OkStatus();
  }

  static bool Leads(const Coordinator& c) {
    return HealthOf(c.address, net::kLeaderHealthService) == 1;
  }
  static bool StandsBy(const Coordinator& c) {
    return HealthOf(c.address, "") == 1 &&
           HealthOf(c.address, net::kLeaderHealthService) == 2;
  }

  // The coordinator the answering coordinator's status names as leader,
  // once its own health agrees (nullptr at the deadline).
  Coordinator* FindLeader(int64_t timeout_ms) {
    Coordinator* leader = nullptr;
    WaitFor(
        [&] {
          leader = nullptr;
          auto status = run_->Status();
          if (!status.ok()) return false;
          for (Coordinator& c : coordinators_) {
            if (c.address == status->leader()) leader = &c;
          }
          return leader != nullptr && Leads(*leader);
        },
        timeout_ms, 10);
    return leader;
  }

  // The lowest step among the ranks (-1 when none answers). A new leader
  // may report the steps it loaded from the store until the heartbeats
  // catch up: `reached_` keeps the highest value seen.
  int64_t Step() {
    auto status = run_->Status();
    const int64_t step = status.ok() ? MinRankedStep(*status) : -1;
    reached_ = std::max(reached_, step);
    return step;
  }

  // Waits until the ranks went a random 5..30 steps past the highest step
  // seen: a seeded random moment of the training. False when the job
  // (nearly) ended first.
  bool RandomMoment(const char* what) {
    Step();
    const int64_t at =
        reached_ + std::uniform_int_distribution<int64_t>(5, 30)(rng_);
    std::printf("  %s at step %lld\n", what, static_cast<long long>(at));
    return WaitFor([&] { return Step() >= at; }, 60000, 10) &&
           at < run_->job().steps - 20;
  }

  // The first event of `kind` after `after_seq`, polled tightly so that
  // what follows it happens right after it.
  absl::StatusOr<v1::Event> AwaitEvent(const std::string& kind,
                                       int64_t after_seq) {
    std::vector<v1::Event> found;
    WaitFor(
        [&] {
          found = EventsOfKind(run_->Events(), kind, after_seq);
          return !found.empty();
        },
        60000, 5);
    if (found.empty()) {
      return absl::DeadlineExceededError(
          absl::StrCat("no '", kind, "' event after seq ", after_seq));
    }
    std::printf("  after seq %lld: %lld %s %s\n",
                static_cast<long long>(after_seq),
                static_cast<long long>(found.front().seq()), kind.c_str(),
                found.front().reason().c_str());
    return found.front();
  }

  // Kills the leader with SIGKILL, measures the time to the next leader's
  // health SERVING, and restarts the killed one on its address as a
  // standby.
  void KillLeader(const std::string& when) {
    Coordinator* leader = FindLeader(10000);
    ASSERT_NE(leader, nullptr) << "no leader\n" << run_->Diagnostics();
    Failover f;
    f.when = when;
    f.killed = leader->name;
    f.killed_wall_ms = WallMs();
    const int64_t killed = SteadyMs();
    leader->process->Signal(SIGKILL);
    ASSERT_TRUE(leader->process->Wait(5000).has_value());
    Coordinator* next = nullptr;
    WaitFor(
        [&] {
          for (Coordinator& c : coordinators_) {
            if (&c != leader && Leads(c)) next = &c;
          }
          return next != nullptr;
        },
        kFailoverBoundMs + 10000, 5);
    ASSERT_NE(next, nullptr) << "no new leader after " << when << "\n"
                             << run_->Diagnostics();
    f.serving_ms = SteadyMs() - killed;
    f.successor = next->name;
    std::printf("  failover %zu (%s): %s killed, %s serving after %lld ms\n",
                failovers_.size() + 1, when.c_str(), f.killed.c_str(),
                f.successor.c_str(), static_cast<long long>(f.serving_ms));
    failovers_.push_back(f);
    ASSERT_TRUE(Launch(*leader).ok());
    ASSERT_TRUE(WaitFor([&] { return StandsBy(*leader); }, 15000, 20))
        << leader->name << " did not stand by after its restart\n"
        << run_->Diagnostics();
  }

  // The member holding a random rank of a stable world of 4.
  std::string RandomRankHolder() {
    auto status = run_->WaitForRanksAtStep(4, 0, 60000);
    EXPECT_TRUE(status.ok()) << status.status();
    if (!status.ok()) return "";
    return HolderOf(*status, std::uniform_int_distribution<int>(0, 3)(rng_));
  }

  uint64_t seed_ = 0;
  std::mt19937_64 rng_;
  std::unique_ptr<EtcdCluster> etcd_;
  std::unique_ptr<server::EtcdClient> client_;
  std::unique_ptr<ElasticRun> run_;
  std::string job_path_;
  std::vector<Coordinator> coordinators_;
  std::vector<Failover> failovers_;
  int64_t reached_ = 0;
};

// The epoch of a "propose" or "commit" event ("epoch N world ...").
int64_t EpochOf(const v1::Event& e) {
  static const std::regex kEpoch(R"(^epoch ([0-9]+) )");
  std::smatch m;
  const std::string& reason = e.reason();
  return std::regex_search(reason, m, kEpoch) ? std::stoll(m[1].str()) : -1;
}

TEST_F(HaFailoverTest, LeaderKilledFiveTimesWhileTrainingEndsAtTheReference) {
  ElasticJob job;
  job.name = "ha-train";
  job.instances = 2;
  job.min_world = 2;
  job.max_world = 4;
  job.steps = 600;
  job.step_delay_ms = 40;
  run_ = std::make_unique<ElasticRun>(job);
  auto path = run_->WriteJobFile();
  ASSERT_TRUE(path.ok()) << path.status();
  job_path_ = *path;
  std::vector<std::string> addresses;
  for (int i = 0; i < 3; ++i) {
    Coordinator c;
    c.name = absl::StrCat("c", i);
    c.address = absl::StrCat("127.0.0.1:", PickFreePort());
    addresses.push_back(c.address);
    coordinators_.push_back(std::move(c));
  }
  // c0 first, so that a leader exists before the standbys campaign.
  ASSERT_TRUE(Launch(coordinators_[0]).ok());
  ASSERT_TRUE(WaitFor([&] { return Leads(coordinators_[0]); }, 15000))
      << run_->Diagnostics();
  ASSERT_TRUE(Launch(coordinators_[1]).ok());
  ASSERT_TRUE(Launch(coordinators_[2]).ok());
  ASSERT_TRUE(WaitFor(
      [&] { return StandsBy(coordinators_[1]) && StandsBy(coordinators_[2]); },
      15000))
      << run_->Diagnostics();
  run_->FollowCoordinators(addresses);
  std::vector<std::string> names = WorkerNames(5);
  ASSERT_TRUE(run_->StartWorkers(names).ok());
  auto started = run_->WaitForRanksAtStep(4, 1, kStartMs);
  ASSERT_TRUE(started.ok()) << started.status() << "\n" << run_->Diagnostics();

  // 1. Steady training.
  ASSERT_TRUE(RandomMoment("failover 1")) << "the job ended first";
  ASSERT_NO_FATAL_FAILURE(KillLeader("steady training"));

  // 2. A rank dies; the spare takes over; the leader dies right after the
  // proposal, before the transition is stable (before or after its commit,
  // as the race goes).
  ASSERT_TRUE(RandomMoment("rank kill 1")) << "the job ended first";
  const std::string victim1 = RandomRankHolder();
  ASSERT_FALSE(victim1.empty());
  std::vector<v1::Event> before = run_->Events();
  ASSERT_FALSE(before.empty()) << run_->Diagnostics();
  int64_t seq = LastSeq(before);
  run_->cluster().worker(victim1)->Signal(SIGKILL);
  auto proposed = AwaitEvent("propose", seq);
  ASSERT_TRUE(proposed.ok()) << proposed.status() << "\n"
                             << run_->Diagnostics();
  ASSERT_NO_FATAL_FAILURE(KillLeader("mid-transition, after the proposal"));
  const int64_t mid_kill_wall = failovers_.back().killed_wall_ms;
  ASSERT_TRUE(run_->WaitForRanksAtStep(4, 0, kStartMs).ok())
      << run_->Diagnostics();

  // 3. One etcd member down during a failover, then back.
  ASSERT_TRUE(RandomMoment("etcd member kill")) << "the job ended first";
  const int member = std::uniform_int_distribution<int>(0, 2)(rng_);
  etcd_->Kill(member);
  // If it led etcd, the others elect a leader first (etcd then renews every
  // lease to its full TTL, the dead coordinator's too): the failover below
  // is measured with one member down, not across etcd's own election.
  const int64_t etcd_killed = SteadyMs();
  absl::Status elected = etcd_->WaitForLeader(15000);
  ASSERT_TRUE(elected.ok()) << elected;
  std::printf(
      "  etcd member %d killed; the others agree on a leader after "
      "%lld ms\n",
      member, static_cast<long long>(SteadyMs() - etcd_killed));
  ASSERT_TRUE(RandomMoment("failover 3")) << "the job ended first";
  ASSERT_NO_FATAL_FAILURE(KillLeader("one etcd member down"));
  ASSERT_TRUE(etcd_->Restart(member).ok()) << "etcd member " << member;
  elected = etcd_->WaitForLeader(15000);
  ASSERT_TRUE(elected.ok()) << elected;
  std::printf("  etcd member %d restarted\n", member);

  // 4. A new spare, then a rank dies: the leader dies right after the
  // re-shard's commit, before it is stable.
  ASSERT_TRUE(run_->StartWorker("w5").ok());
  names.push_back("w5");
  ASSERT_TRUE(WaitFor(
      [&] {
        auto s = run_->Status();
        const v1::MemberStatus* m =
            s.ok() ? FindMemberStatus(*s, "w5") : nullptr;
        return m != nullptr && m->state() == v1::MEMBER_STATE_SPARE;
      },
      kStartMs))
      << run_->Diagnostics();
  ASSERT_TRUE(RandomMoment("rank kill 2")) << "the job ended first";
  const std::string victim2 = RandomRankHolder();
  ASSERT_FALSE(victim2.empty());
  before = run_->Events();
  ASSERT_FALSE(before.empty()) << run_->Diagnostics();
  seq = LastSeq(before);
  run_->cluster().worker(victim2)->Signal(SIGKILL);
  auto committed = AwaitEvent("commit", seq);
  ASSERT_TRUE(committed.ok()) << committed.status() << "\n"
                              << run_->Diagnostics();
  // The dashboard shows an event only once its write is durable: the
  // commit is in etcd already, so the next leader completes the re-shard
  // itself, right after the commit.
  ASSERT_TRUE(Stored(*committed)) << "a commit shown before it was stored\n"
                                  << run_->Diagnostics();
  ASSERT_NO_FATAL_FAILURE(KillLeader("re-shard, after the commit"));
  const int64_t reshard_kill_wall = failovers_.back().killed_wall_ms;
  ASSERT_TRUE(run_->WaitForRanksAtStep(4, 0, kStartMs).ok())
      << run_->Diagnostics();

  // 5. Steady training again.
  ASSERT_TRUE(RandomMoment("failover 5")) << "the job ended first";
  ASSERT_NO_FATAL_FAILURE(KillLeader("steady training"));

  // The job ends; the survivors exit 0 with the reference masters.
  names = Without(Without(names, victim1), victim2);
  ExpectExitedZero(*run_, names);
  ExpectReferenceMasters(*run_, 4);

  const std::vector<v1::Event> events = run_->Events();
  ASSERT_FALSE(events.empty());
  // Dead: the two killed workers only, never one the failovers cost.
  std::set<std::string> dead;
  for (const v1::Event& e : EventsOfKind(events, "dead")) {
    for (const std::string& name : names) {
      if (e.reason().rfind("member " + name + ":", 0) == 0) dead.insert(name);
    }
    EXPECT_TRUE(e.reason().rfind("member " + victim1 + ":", 0) == 0 ||
                e.reason().rfind("member " + victim2 + ":", 0) == 0)
        << e.reason() << "\n"
        << DescribeEvents(events);
  }
  EXPECT_TRUE(dead.empty()) << DescribeEvents(events);
  // Epochs never repeat: the commits' epochs strictly increase.
  int64_t last_epoch = 0;
  for (const v1::Event& e : EventsOfKind(events, "commit")) {
    EXPECT_GT(EpochOf(e), last_epoch) << DescribeEvents(events);
    last_epoch = std::max(last_epoch, EpochOf(e));
  }
  // Kills 2 and 4 came before their transition was stable: they hit it in
  // flight (kill 2 before or after its commit, as the race went).
  for (const auto& [after, killed] :
       {std::make_pair(proposed->seq(), mid_kill_wall),
        std::make_pair(committed->seq(), reshard_kill_wall)}) {
    const std::vector<v1::Event> stable = EventsOfKind(events, "stable", after);
    ASSERT_FALSE(stable.empty()) << DescribeEvents(events);
    EXPECT_GE(stable.front().time_ms(), killed) << "stable before the kill\n"
                                                << DescribeEvents(events);
  }
  // A transition in flight completes after a failover: the re-shard
  // committed before kill 4 becomes stable under its own epoch (not
  // proposed again), and no transition waits out its timeout.
  const std::vector<v1::Event> stable =
      EventsOfKind(events, "stable", committed->seq());
  ASSERT_FALSE(stable.empty());
  EXPECT_EQ(stable.front().reason().rfind(
                absl::StrCat("epoch ", EpochOf(*committed), " active"), 0),
            0u)
      << DescribeEvents(events);
  EXPECT_TRUE(EventsOfKind(events, "timeout").empty())
      << DescribeEvents(events);
  ASSERT_EQ(failovers_.size(), 5u);
  for (const Failover& f : failovers_) {
    EXPECT_LE(f.serving_ms, kFailoverBoundMs) << f.when;
  }
}

}  // namespace
}  // namespace zshard::testing
