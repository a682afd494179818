// Leases at scale with the fake clock: a heartbeat is answered while a
// proposal is being planned (the planner blocked on purpose), members
// heartbeating on time are never declared dead, and after a coordinator
// restart or a long pause every member gets one lease of grace.
#include <atomic>
#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "server/store/sqlite_state_store.h"
#include "tests/server/membership/membership_harness.h"
#include "tests/server/store/store_backends.h"
#include "tests/testing/temp_dir.h"

namespace zshard::server {
namespace {

using testing::Harness;

TEST(LeaseGraceTest, AHeartbeatIsAnsweredWhileAProposalIsPlanned) {
  absl::Notification planning;
  absl::Notification release;
  std::atomic<bool> block{false};
  MembershipOptions options;
  options.planning_hook = [&] {
    if (!block.load()) return;
    planning.Notify();
    release.WaitForNotification();
  };
  job::JobSpec spec = testing::TestJob(2, 2, 8);
  spec.world.resize = job::ResizePolicy::kKeepI;  // worlds 2, 4, 6, 8
  spec.transition_settle_ms = 100;
  Harness h(spec, nullptr, options);
  testing::Session a = h.Join("a");
  h.Join("b");
  h.clock_.AdvanceMs(100);
  h.m_->Tick();
  h.Settle();
  h.Join("c");
  h.Join("d");
  h.clock_.AdvanceMs(100);
  block = true;
  // The ticker proposes world 4 and blocks inside the planner, holding the
  // membership's lock.
  std::thread ticker([&] { h.m_->Tick(); });
  planning.WaitForNotification();
  h.clock_.AdvanceMs(1000);
  auto r = h.m_->Heartbeat(a.id, a.token, 1, 7);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->epoch, 1);
  EXPECT_EQ(r->state, MemberState::kActive);
  EXPECT_EQ(r->command, Command::kNone);
  EXPECT_TRUE(h.m_->CheckSession(a.id, a.token).ok());
  EXPECT_EQ(h.m_->CheckSession(a.id, "bad").code(),
            absl::StatusCode::kUnauthenticated);
  release.Notify();
  ticker.join();
  EXPECT_EQ(h.m_->Stats().proposals, 2);
}

TEST(LeaseGraceTest, OnTimeHeartbeatsAreNeverDeclaredDead) {
  job::JobSpec spec = testing::TestJob(2, 2, 64);
  Harness h(spec);
  for (int i = 0; i < 40; ++i) h.Join("w" + std::to_string(i));
  h.Settle();
  const int64_t proposals = h.m_->Stats().proposals;
  // 60 s of ticks every 50 ms, everyone beating once a second, slightly
  // out of phase; a lease is 5 s.
  for (int t = 0; t < 1200; ++t) {
    h.clock_.AdvanceMs(50);
    if (t % 20 == 0) h.BeatAll();
    h.m_->Tick();
  }
  EXPECT_EQ(h.m_->Stats().members_by_state[MemberState::kDead], 0);
  EXPECT_EQ(h.m_->Stats().proposals, proposals);
}

class LeaseGraceStoreTest
    : public ::testing::TestWithParam<testing::StoreKind> {
 protected:
  void SetUp() override {
    const std::string skip = testing::StoreSkipReason(GetParam());
    if (!skip.empty()) GTEST_SKIP() << skip;
  }
  testing::StoreLocation location_{GetParam()};
};

TEST_P(LeaseGraceStoreTest, EveryMemberGetsOneLeaseOfGraceAfterARestart) {
  auto store = location_.Open().value();
  FakeClock clock(1000);
  job::JobSpec spec = testing::TestJob(2, 2, 4);
  // Three of four stay silent after the restart: silence alone judges them
  // here, as with isolation off (IsolationTest covers the rule).
  spec.isolation_fraction = 1;
  std::vector<std::pair<std::string, std::string>> sessions;
  {
    Harness h(spec, store.get());
    for (int i = 0; i < 4; ++i) {
      testing::Session s = h.Join("w" + std::to_string(i));
      sessions.emplace_back(s.id, s.token);
    }
    h.Settle();
  }
  // The coordinator was down for a minute (no heartbeat heard; a lease is
  // 5 s) and comes back on its store: every member gets a lease from now.
  clock.AdvanceMs(60000);
  auto m = Membership::Create(spec, &clock, store.get()).value();
  clock.AdvanceMs(5000);
  m->Tick();
  EXPECT_EQ(m->Stats().members_by_state[MemberState::kDead], 0);
  // w0 heartbeats; the silent ones' grace runs out after one lease.
  ASSERT_TRUE(m->Heartbeat(sessions[0].first, sessions[0].second, 1, 0).ok());
  clock.AdvanceMs(1);
  m->Tick();
  MembershipStats s = m->Stats();
  EXPECT_EQ(s.members_by_state[MemberState::kDead], 3);
  EXPECT_EQ(s.members_by_state[MemberState::kActive], 1);
}

INSTANTIATE_TEST_SUITE_P(Stores, LeaseGraceStoreTest,
                         ::testing::ValuesIn(testing::kStoreKinds),
                         testing::StoreKindName);

TEST(LeaseGraceTest, ALongPauseGivesEveryMemberOneLeaseOfGrace) {
  MembershipOptions options;
  options.pause_grace_gap_ms = 1000;
  Harness h(testing::TestJob(2, 2, 4), nullptr, options);
  for (int i = 0; i < 4; ++i) h.Join("w" + std::to_string(i));
  h.Settle();
  h.m_->Tick();
  // The coordinator stops for 30 s: nobody's heartbeat was heard, and the
  // first tick after it must not take that for deaths.
  h.clock_.AdvanceMs(30000);
  h.m_->Tick();
  EXPECT_EQ(h.m_->Stats().members_by_state[MemberState::kDead], 0);
  bool pause_event = false;
  for (const Event& e : h.m_->events()->After(0, 100).events) {
    if (e.kind == "pause") pause_event = true;
  }
  EXPECT_TRUE(pause_event);
  // Ticking on; three beat, one stays silent past its lease of grace.
  for (int t = 0; t < 100; ++t) {
    h.clock_.AdvanceMs(50);
    if (t % 20 == 0) h.BeatAll("w3");
    h.m_->Tick();
  }
  h.clock_.AdvanceMs(1);
  h.m_->Tick();
  EXPECT_EQ(h.StateOf("w3"), MemberState::kDead);
  EXPECT_EQ(h.m_->Stats().members_by_state[MemberState::kDead], 1);
}

}  // namespace
}  // namespace zshard::server
