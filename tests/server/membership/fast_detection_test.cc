// A peer's report of a member whose connections closed (a killed process)
// confirms its death at once; a member whose plan watch stays open (a
// paused process) is still judged by its heartbeats.
#include <string>

#include "gtest/gtest.h"
#include "tests/server/membership/membership_harness.h"

namespace zshard::server {
namespace {

using testing::Harness;

struct Cluster {
  Harness h{testing::TestJob(2, 2, 4)};
  EpochPlan plan;
  std::string victim;
  testing::Session reporter;

  Cluster() {
    for (int i = 0; i < 5; ++i) h.Join("w" + std::to_string(i));
    plan = h.Settle();
    for (const auto& [name, s] : h.sessions_) h.m_->WatchOpened(s.id);
    victim = h.NameAtRank(1);
    reporter = h.sessions_.at(h.NameAtRank(0));
  }
  absl::StatusOr<MemberState> Report() {
    return h.m_->ReportSuspect(reporter.id, reporter.token, plan.epoch, "", 1,
                               "collective failed: peer lost");
  }
};

TEST(FastDetectionTest, AReportedMemberWhoseWatchClosedIsDeadAtOnce) {
  Cluster c;
  c.h.clock_.AdvanceMs(20);
  c.h.m_->WatchClosed(c.h.sessions_.at(c.victim).id);
  absl::StatusOr<MemberState> r = c.Report();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, MemberState::kDead);
}

TEST(FastDetectionTest, AWatchThatClosesAfterTheReportConfirmsAtTheNextTick) {
  Cluster c;
  c.h.clock_.AdvanceMs(20);
  ASSERT_EQ(*c.Report(), MemberState::kActive);
  bool shown = false;
  for (const MemberView& v : c.h.m_->View().members) {
    if (v.member.name == c.victim) shown = v.suspect;
  }
  EXPECT_TRUE(shown);  // zshardctl status marks it
  c.h.clock_.AdvanceMs(5);
  c.h.m_->WatchClosed(c.h.sessions_.at(c.victim).id);
  c.h.clock_.AdvanceMs(50);
  c.h.m_->Tick();
  EXPECT_EQ(c.h.StateOf(c.victim), MemberState::kDead);
  // The settle window passes: the proposal records the detection time,
  // from the report to the proposal.
  c.h.clock_.AdvanceMs(1000);
  c.h.BeatAll(c.victim);
  c.h.m_->Tick();
  const DetectionHistogram d = c.h.m_->Stats().failure_detection;
  EXPECT_EQ(d.count, 1);
  EXPECT_GT(d.sum, 0.05);
  EXPECT_LT(d.sum, 2.0);
}

TEST(FastDetectionTest, APausedMemberWithAnOpenWatchIsJudgedByItsHeartbeats) {
  Cluster c;
  c.h.clock_.AdvanceMs(20);
  ASSERT_EQ(*c.Report(), MemberState::kActive);
  c.h.clock_.AdvanceMs(50);
  c.h.m_->Tick();
  EXPECT_EQ(c.h.StateOf(c.victim), MemberState::kActive);
  // It heartbeats within the grace: the report is answered.
  c.h.Beat(c.victim);
  c.h.clock_.AdvanceMs(2000);
  c.h.BeatAll();
  c.h.m_->Tick();
  EXPECT_EQ(c.h.StateOf(c.victim), MemberState::kActive);
}

TEST(FastDetectionTest, AMemberThatNeverWatchedIsNotConfirmedByItsWatch) {
  Harness h(testing::TestJob(2, 2, 4));
  for (int i = 0; i < 5; ++i) h.Join("w" + std::to_string(i));
  const EpochPlan p = h.Settle();
  const testing::Session r = h.sessions_.at(h.NameAtRank(0));
  h.clock_.AdvanceMs(20);
  absl::StatusOr<MemberState> s =
      h.m_->ReportSuspect(r.id, r.token, p.epoch, "", 1, "peer lost");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(*s, MemberState::kActive);
}

}  // namespace
}  // namespace zshard::server
