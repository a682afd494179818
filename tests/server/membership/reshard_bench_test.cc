// A measurement, not a check of speed (disabled; run with
// --gtest_also_run_disabled_tests): how long a proposal with its moves
// takes on a llama2-70b job at W=1024, I=8: a spare taking over a dead
// rank, and a shrink to W=1016 that changes D and moves almost everything.
#include <chrono>
#include <cstdio>

#include "gtest/gtest.h"
#include "server/membership/membership.h"

namespace zshard::server {
namespace {

TEST(ReshardBench, DISABLED_Llama70bW1024Proposals) {
  job::JobSpec spec =
      job::ParseJobSpec(
          R"({"name": "big", "model": {"preset": "llama2-70b"},)"
          R"("world": {"instances": 8, "min": 1016, "max": 1024},)"
          R"("lease_timeout_ms": 5000, "heartbeat_interval_ms": 1000,)"
          R"("workload": {"kind": "idle"}})")
          .value();
  FakeClock clock(1000);
  auto m = Membership::Create(spec, &clock, nullptr).value();
  std::vector<JoinReply> joined;
  for (int i = 0; i < 1025; ++i) {
    joined.push_back(
        m->Join({"w" + std::to_string(i), "127.0.0.1:1", {}, {}}).value());
  }
  auto settle = [&] {
    for (int round = 0; round < 4; ++round) {
      int64_t e = m->View().pending_epoch;
      if (e == 0) return;
      for (const JoinReply& j : joined) {
        (void)m->AckPrepared(j.worker_id, j.token, e, 0, false);
      }
      for (const JoinReply& j : joined) {
        (void)m->AckActive(j.worker_id, j.token, e);
      }
    }
  };
  settle();
  ASSERT_EQ(m->View().world, 1024);
  auto kill = [&](const std::string& victim_id) {
    clock.AdvanceMs(6000);
    for (const JoinReply& j : joined) {
      if (j.worker_id != victim_id) {
        (void)m->Heartbeat(j.worker_id, j.token, 0, 0);
      }
    }
    auto t0 = std::chrono::steady_clock::now();
    m->Tick();
    auto t1 = std::chrono::steady_clock::now();
    return std::chrono::duration<double, std::milli>(t1 - t0).count();
  };
  EpochPlan stable = m->CommittedPlan();
  double takeover = kill(stable.slots[5].worker_id);
  EpochPlan p;
  WatchBatch b = m->WaitForUpdates(-1, absl::ZeroDuration());
  p = b.updates.back()->plan;
  std::printf("spare takeover: proposal in %.1f ms, %zu moves, %lld bytes\n",
              takeover, p.moves.size(),
              static_cast<long long>(p.summary.bytes_moved));
  settle();
  ASSERT_EQ(m->View().world, 1024);
  stable = m->CommittedPlan();
  double shrink = kill(stable.slots[9].worker_id);
  b = m->WaitForUpdates(-1, absl::ZeroDuration());
  p = b.updates.back()->plan;
  std::printf("shrink to %d: proposal in %.1f ms, %zu moves, %lld bytes\n",
              p.world, shrink, p.moves.size(),
              static_cast<long long>(p.summary.bytes_moved));
  EXPECT_LT(takeover, 1000);
  EXPECT_LT(shrink, 1000);
}

}  // namespace
}  // namespace zshard::server
