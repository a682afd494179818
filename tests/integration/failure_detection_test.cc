// How fast a dead worker is told from a slow one, with real processes on
// 127.0.0.1 and a 5 s lease: a SIGKILLed worker's peers see its
// connections close and report it, its plan watch to the coordinator has
// closed too, so it is declared dead at once and the spare's epoch is
// stable about a second after the kill, not a lease later. A SIGSTOPped
// worker keeps its sockets open: nothing says it died, so it is judged by
// its lease and never declared dead before it. A worker sent SIGTERM while
// the coordinator is gone exits within seconds.

#include <signal.h>

#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/integration/elastic_cluster.h"
#include "tests/integration/elastic_expect.h"

namespace zshard::testing {
namespace {

TEST(FailureDetectionTest, AKilledRankIsReplacedFastAStoppedOneKeepsItsLease) {
  ElasticJob job;
  job.instances = 2;
  job.min_world = 2;
  job.max_world = 4;
  job.steps = 90;
  job.lease_timeout_ms = 5000;
  ElasticRun run(job);
  ASSERT_TRUE(run.Start().ok());
  const std::vector<std::string> names = WorkerNames(5);
  for (const std::string& name : names) {
    ASSERT_TRUE(
        run.StartWorker(name, {"--collective-timeout-ms", "1000"}).ok());
  }
  auto before = run.WaitForRanksAtStep(4, 10, kStartMs);
  ASSERT_TRUE(before.ok()) << before.status() << "\n" << run.Diagnostics();
  const std::string killed = HolderOf(*before, 1);
  const std::string spare = SpareOf(*before);
  ASSERT_FALSE(killed.empty() || spare.empty()) << before->ShortDebugString();

  // SIGKILL: stable again well within the lease.
  int64_t seq = LastSeq(run.Events());
  const int64_t killed_ms = WallMs();
  run.cluster().worker(killed)->Signal(SIGKILL);
  auto stable = run.WaitForEvent("stable", seq, kStartMs);
  ASSERT_TRUE(stable.ok()) << stable.status() << "\n" << run.Diagnostics();
  const int64_t to_stable_ms = stable->time_ms() - killed_ms;
  std::vector<v1::Event> events = run.Events();
  std::vector<v1::Event> dead = EventsOfKind(events, "dead", seq);
  ASSERT_EQ(dead.size(), 1u) << DescribeEvents(events);
  std::printf("SIGKILL of %s: dead after %lld ms, stable after %lld ms: %s\n",
              killed.c_str(),
              static_cast<long long>(dead[0].time_ms() - killed_ms),
              static_cast<long long>(to_stable_ms), dead[0].reason().c_str());
  EXPECT_LT(to_stable_ms, 2000) << DescribeEvents(events);
  EXPECT_EQ(dead[0].reason().find("lease"), std::string::npos)
      << dead[0].reason();

  // SIGSTOP: its sockets stay open, its peers' collectives only time out;
  // it is dead when its lease runs out, not before.
  auto again = run.WaitForRanksAtStep(4, 25, kStartMs);
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << run.Diagnostics();
  const std::string stopped = HolderOf(*again, 2);
  ASSERT_FALSE(stopped.empty());
  seq = LastSeq(run.Events());
  const int64_t stopped_ms = WallMs();
  run.cluster().worker(stopped)->Signal(SIGSTOP);
  auto stopped_dead = run.WaitForEvent("dead", seq, kStartMs);
  const int64_t dead_after_ms = WallMs() - stopped_ms;
  run.cluster().worker(stopped)->Signal(SIGKILL);
  ASSERT_TRUE(stopped_dead.ok()) << stopped_dead.status() << "\n"
                                 << run.Diagnostics();
  std::printf("SIGSTOP of %s: dead after %lld ms: %s\n", stopped.c_str(),
              static_cast<long long>(stopped_dead->time_ms() - stopped_ms),
              stopped_dead->reason().c_str());
  // The lease counts from its last heartbeat (every 100 ms) before the stop.
  EXPECT_GE(stopped_dead->time_ms() - stopped_ms, job.lease_timeout_ms - 200)
      << stopped_dead->reason();
  EXPECT_GE(dead_after_ms, job.lease_timeout_ms - 200);

  std::vector<std::string> rest = Without(Without(names, killed), stopped);
  ExpectExitedZero(run, rest);
  ExpectReferenceMasters(run, 2);
}

// SIGTERM while the coordinator is gone: the worker cannot hand its state
// over (its Leave finds no coordinator), so it stops stepping and exits 0
// within seconds instead of stepping on without one.
TEST(FailureDetectionTest, SigtermWithTheCoordinatorGoneExits) {
  ElasticJob job;
  job.instances = 1;
  job.min_world = 2;
  job.max_world = 2;
  job.steps = 100000;
  ElasticRun run(job);
  ASSERT_TRUE(run.Start().ok());
  ASSERT_TRUE(run.StartWorkers(WorkerNames(2)).ok());
  auto before = run.WaitForRanksAtStep(2, 5, kStartMs);
  ASSERT_TRUE(before.ok()) << before.status() << "\n" << run.Diagnostics();
  run.cluster().coordinator()->Signal(SIGKILL);
  run.cluster().worker("w0")->Signal(SIGTERM);
  const int64_t sent_ms = WallMs();
  std::optional<int> code = run.cluster().worker("w0")->Wait(30000);
  EXPECT_EQ(code, std::optional<int>(0)) << run.WorkerLog("w0");
  std::printf("SIGTERM with the coordinator gone: exited after %lld ms\n",
              static_cast<long long>(WallMs() - sent_ms));
  EXPECT_LT(WallMs() - sent_ms, 20000);
  run.cluster().worker("w1")->Signal(SIGKILL);
}

}  // namespace
}  // namespace zshard::testing
