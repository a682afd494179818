// The coordinator cut off from most members declares no one dead: the
// isolation rule (IsolationGuard) and what the membership does with it.
#include <string>

#include "gtest/gtest.h"
#include "server/membership/members/isolation_guard.h"
#include "tests/server/membership/membership_harness.h"

namespace zshard::server {
namespace {

using testing::Harness;
using Step = IsolationGuard::Step;

TEST(IsolationGuardTest, ALeaseRunningOutWhileMostAreSilentIsIsolation) {
  IsolationGuard g(0.5);
  EXPECT_EQ(g.Check(1, 2, 4, 100), Step::kNone);  // half is not most
  EXPECT_EQ(g.Check(0, 5, 5, 150), Step::kNone);  // no lease ran out yet
  EXPECT_FALSE(g.isolated());
  EXPECT_EQ(g.Check(1, 3, 5, 200), Step::kStarted);
  EXPECT_TRUE(g.isolated());
  EXPECT_EQ(g.since_ms(), 200);
  EXPECT_EQ(g.Check(5, 5, 5, 300), Step::kHeld);
  EXPECT_EQ(g.Check(0, 4, 5, 350), Step::kHeld);
  EXPECT_EQ(g.since_ms(), 200);
  EXPECT_EQ(g.Check(1, 1, 5, 400), Step::kEnded);
  EXPECT_FALSE(g.isolated());
  EXPECT_EQ(g.since_ms(), -1);
  EXPECT_EQ(g.Check(1, 1, 5, 500), Step::kNone);
}

TEST(IsolationGuardTest, TooFewMembersOrFractionOneNeverIsolate) {
  IsolationGuard g(0.5);
  EXPECT_EQ(g.Check(2, 2, 2, 100), Step::kNone);
  EXPECT_EQ(g.Check(1, 1, 1, 100), Step::kNone);
  IsolationGuard never(1);
  EXPECT_EQ(never.Check(5, 5, 5, 100), Step::kNone);
}

// Counts the events of `kind`.
int CountEvents(Membership& m, const std::string& kind) {
  int n = 0;
  for (const Event& e : m.events()->After(0, 1000).events) n += e.kind == kind;
  return n;
}

TEST(IsolationTest, EveryoneSilentIsNoMassDeath) {
  Harness h(testing::TestJob(2, 2, 4));
  for (int i = 0; i < 5; ++i) h.Join("w" + std::to_string(i));
  const EpochPlan before = h.Settle();
  ASSERT_EQ(before.world, 4);
  // The coordinator hears no one for three leases (isolated from the
  // second tick, when the leases ran out).
  for (int i = 0; i < 3; ++i) {
    h.clock_.AdvanceMs(5000);
    h.m_->Tick();
  }
  MembershipStats s = h.m_->Stats();
  EXPECT_TRUE(s.isolated);
  EXPECT_EQ(s.members_by_state[MemberState::kDead], 0);
  EXPECT_EQ(CountEvents(*h.m_, "isolated"), 1);
  EXPECT_EQ(CountEvents(*h.m_, "dead"), 0);
  EXPECT_TRUE(h.m_->View().isolated);
  EXPECT_EQ(h.m_->View().isolated_ms, 5000);
  // The links heal: every member heartbeats with its old token.
  h.BeatAll();
  h.clock_.AdvanceMs(100);
  h.m_->Tick();
  s = h.m_->Stats();
  EXPECT_FALSE(s.isolated);
  EXPECT_EQ(s.members_by_state[MemberState::kDead], 0);
  EXPECT_EQ(CountEvents(*h.m_, "isolation_ended"), 1);
  // No re-shard: the same epoch, nothing proposed.
  EXPECT_EQ(h.m_->CommittedPlan().epoch, before.epoch);
  EXPECT_TRUE(h.Updates().empty());
  EXPECT_EQ(h.Beat("w0").command, Command::kNone);
}

TEST(IsolationTest, OneStillSilentAfterTheRestCameBackGetsOneLease) {
  Harness h(testing::TestJob(2, 2, 4));
  for (int i = 0; i < 5; ++i) h.Join("w" + std::to_string(i));
  h.Settle();
  h.clock_.AdvanceMs(6000);
  h.m_->Tick();
  ASSERT_TRUE(h.m_->Stats().isolated);
  // Four come back; w4 stays silent.
  h.BeatAll("w4");
  h.m_->Tick();
  EXPECT_FALSE(h.m_->Stats().isolated);
  EXPECT_EQ(h.m_->Stats().members_by_state[MemberState::kDead], 0);
  // One lease after the rest came back, w4 is dead as usual.
  h.clock_.AdvanceMs(3000);
  h.BeatAll("w4");
  h.m_->Tick();
  EXPECT_EQ(h.StateOf("w4"), MemberState::kSpare);
  h.clock_.AdvanceMs(2100);
  h.BeatAll("w4");
  h.m_->Tick();
  EXPECT_EQ(h.StateOf("w4"), MemberState::kDead);
}

TEST(IsolationTest, AConfirmedSuspectDiesEvenWhileIsolated) {
  Harness h(testing::TestJob(2, 2, 4));
  for (int i = 0; i < 5; ++i) h.Join("w" + std::to_string(i));
  const EpochPlan p = h.Settle();
  const std::string victim = h.NameAtRank(1);
  const std::string reporter = h.NameAtRank(0);
  // The reporter's peer report reaches the coordinator; then no one is
  // heard for a lease.
  h.clock_.AdvanceMs(100);
  const testing::Session& r = h.sessions_.at(reporter);
  ASSERT_TRUE(
      h.m_->ReportSuspect(r.id, r.token, p.epoch, "", 1, "peer lost").ok());
  h.clock_.AdvanceMs(6000);
  h.m_->Tick();
  EXPECT_TRUE(h.m_->Stats().isolated);
  EXPECT_EQ(h.StateOf(victim), MemberState::kDead);
  EXPECT_EQ(h.m_->Stats().members_by_state[MemberState::kDead], 1);
}

TEST(IsolationTest, LeasesRunningOutTicksApartCountTogether) {
  Harness h(testing::TestJob(2, 2, 4));
  for (int i = 0; i < 5; ++i) h.Join("w" + std::to_string(i));
  h.Settle();
  // The last heartbeats came 0..400 ms apart: the leases run out in
  // different ticks, and the first one to run out finds the others silent.
  for (int i = 0; i < 5; ++i) {
    h.clock_.AdvanceMs(100);
    h.Beat("w" + std::to_string(i));
  }
  for (int t = 0; t < 120; ++t) {
    h.clock_.AdvanceMs(50);
    h.m_->Tick();
  }
  EXPECT_TRUE(h.m_->Stats().isolated);
  EXPECT_EQ(h.m_->Stats().members_by_state[MemberState::kDead], 0);
}

TEST(IsolationTest, TwoMembersSilentAreDeadAsUsual) {
  Harness h(testing::TestJob(1, 1, 2));
  h.Join("w0");
  h.Join("w1");
  h.Settle();
  h.clock_.AdvanceMs(6000);
  h.m_->Tick();
  EXPECT_FALSE(h.m_->Stats().isolated);
  EXPECT_EQ(h.m_->Stats().members_by_state[MemberState::kDead], 2);
}

}  // namespace
}  // namespace zshard::server
