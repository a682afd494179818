// A broken link between two members is found and routed around: each
// failure that names the peer counts against the pair, a pair that failed
// twice has one end excluded (a spare takes its rank), and broken epochs
// are proposed again only after a back-off.
#include <string>

#include "gtest/gtest.h"
#include "server/membership/transition/link_book.h"
#include "tests/server/membership/membership_harness.h"

namespace zshard::server {
namespace {

using testing::Harness;

TEST(LinkBookTest, EachEpochCountsOncePerPair) {
  LinkBook b;
  EXPECT_EQ(b.Record("a", "b", 3), std::make_pair(1, true));
  EXPECT_EQ(b.Record("b", "a", 3), std::make_pair(1, false));  // other end
  EXPECT_EQ(b.Record("a", "b", 4), std::make_pair(2, true));
  EXPECT_EQ(b.failures(), 2);
}

TEST(LinkBookTest, TheEndInMoreFailingPairsGoesThenFewerBytesThenLater) {
  LinkBook b;
  b.Record("a", "b", 1);
  b.Record("a", "c", 1);
  auto later = [](const std::string& x, const std::string& y) { return x > y; };
  auto same = [](const std::string&) { return int64_t{1200}; };
  // a fails with b and c, though replacing it moves more.
  auto a_more = [](const std::string& x) {
    return x == "a" ? int64_t{2400} : int64_t{1200};
  };
  EXPECT_EQ(b.ChooseEnd("a", "b", a_more, later), "a");
  LinkBook tie;
  tie.Record("a", "b", 1);
  EXPECT_EQ(tie.ChooseEnd("a", "b", same, later), "b");  // b joined later
  // A spare (nothing to move) goes before a rank, whoever joined later.
  auto a_spare = [](const std::string& x) {
    return x == "a" ? int64_t{0} : int64_t{1200};
  };
  EXPECT_EQ(tie.ChooseEnd("a", "b", a_spare, later), "a");
  EXPECT_EQ(tie.ChooseEnd("a", "b", a_more, later), "b");
}

TEST(LinkBookTest, AQuarantineEndsAfterItsTime) {
  LinkBook b;
  b.Record("a", "b", 1);
  b.Exclude("a", Quarantine{"b", "w1", 1000, "link failed twice"});
  EXPECT_EQ(b.exclusions(), 1);
  ASSERT_NE(b.QuarantineOf("a", 999), nullptr);
  EXPECT_EQ(b.QuarantineOf("a", 999)->peer, "b");
  EXPECT_EQ(b.QuarantineOf("a", 1000), nullptr);
  EXPECT_EQ(b.QuarantineOf("b", 0), nullptr);
  b.Forget("a");
  EXPECT_EQ(b.QuarantineOf("a", 0), nullptr);
}

int CountEvents(Membership& m, const std::string& kind) {
  int n = 0;
  for (const Event& e : m.events()->After(0, 1000).events) n += e.kind == kind;
  return n;
}

// Reports that `from` could not reach rank `peer` while preparing the
// committed epoch.
void FailPrepare(Harness& h, const std::string& from, int peer) {
  const EpochPlan c = h.m_->CommittedPlan();
  const testing::Session& s = h.sessions_.at(from);
  PrepareFailure f;
  f.error = "gloo rendezvous: connect: no route to host";
  f.peer_rank = peer;
  f.peer_group = "instance 0";
  ASSERT_TRUE(h.m_->AckFailed(s.id, s.token, c.epoch, f).ok());
}

// Proposes and commits the next epoch (PREPARED from every participant)
// without ACTIVE acks: the committed epoch is being prepared.
EpochPlan CommitNext(Harness& h) {
  EpochPlan p;
  for (const PlanUpdate& u : h.Updates()) {
    if (u.phase == PlanPhase::kProposed) p = u.plan;
  }
  EXPECT_GT(p.epoch, 0);
  for (const testing::Session& s : h.Participants(p)) {
    EXPECT_TRUE(h.m_->AckPrepared(s.id, s.token, p.epoch, 0, true).ok());
  }
  return h.m_->CommittedPlan();
}

TEST(LinkFailuresTest, APairThatFailsTwiceHasOneEndReplacedByTheSpare) {
  Harness h(testing::TestJob(2, 2, 4));
  for (int i = 0; i < 5; ++i) h.Join("w" + std::to_string(i));
  h.Settle();  // world 4 (w0..w3), w4 spare
  // w4 joined last, so the grown world is proposed with the spare again:
  // the link between ranks 0 and 1 is broken for good.
  const std::string a = h.NameAtRank(0);
  const std::string b = h.NameAtRank(1);
  h.m_->SetTargetWorld(2).value();
  h.clock_.AdvanceMs(1000);
  h.BeatAll();
  h.m_->Tick();
  CommitNext(h);
  FailPrepare(h, a, 1);
  EXPECT_EQ(CountEvents(*h.m_, "link_failed"), 1);
  EXPECT_EQ(CountEvents(*h.m_, "excluded"), 0);
  // The same world again, at once (the first break in a row).
  const EpochPlan again = CommitNext(h);
  EXPECT_EQ(again.world, 2);
  FailPrepare(h, b, 0);  // the other end reports it this time
  EXPECT_EQ(CountEvents(*h.m_, "link_failed"), 2);
  EXPECT_EQ(CountEvents(*h.m_, "excluded"), 1);
  EXPECT_EQ(h.m_->Stats().exclusions, 1);
  // The later joiner of the two is out; the world is formed without it.
  const std::string out = b > a ? b : a;
  const std::string kept = out == a ? b : a;
  h.clock_.AdvanceMs(1000);
  h.BeatAll();
  h.m_->Tick();
  const EpochPlan routed = h.Settle();
  EXPECT_EQ(routed.world, 2);
  bool has_out = false;
  for (int r = 0; r < routed.world; ++r) {
    has_out |= routed.slots[r].name == out;
  }
  EXPECT_FALSE(has_out);
  bool shown = false;
  for (const MemberView& v : h.m_->View().members) {
    if (v.member.name == out) {
      shown = v.quarantine.find("apart from " + kept) == 0;
    }
  }
  EXPECT_TRUE(shown);
}

TEST(LinkFailuresTest, BrokenEpochsBackOffExponentially) {
  Harness h(testing::TestJob(2, 2, 4));
  for (int i = 0; i < 4; ++i) h.Join("w" + std::to_string(i));
  h.Settle();
  h.m_->SetTargetWorld(2).value();
  h.clock_.AdvanceMs(1000);
  h.BeatAll();
  h.m_->Tick();
  // Failures that name no peer: nothing to route around. Count the epochs
  // proposed in 60 s of ticks every 50 ms.
  int proposals = 0;
  int64_t last_fail = -1;
  for (int t = 0; t < 1200; ++t) {
    for (const PlanUpdate& u : h.Updates()) {
      if (u.phase != PlanPhase::kProposed) continue;
      ++proposals;
      for (const testing::Session& s : h.Participants(u.plan)) {
        ASSERT_TRUE(
            h.m_->AckPrepared(s.id, s.token, u.plan.epoch, 0, true).ok());
      }
      const testing::Session& s = h.sessions_.at(h.NameAtRank(0));
      PrepareFailure f;
      f.error = "disk full";
      ASSERT_TRUE(
          h.m_->AckFailed(s.id, s.token, h.m_->CommittedPlan().epoch, f).ok());
      last_fail = h.clock_.NowMs();
    }
    h.clock_.AdvanceMs(50);
    h.BeatAll();
    h.m_->Tick();
  }
  // At once, then after 100, 200, ... 6400 ms, then every 10 s (plus the
  // settle windows): about 13 in a minute, never one a tick.
  EXPECT_GE(proposals, 9);
  EXPECT_LE(proposals, 15);
  EXPECT_GT(last_fail, 0);
}

}  // namespace
}  // namespace zshard::server
