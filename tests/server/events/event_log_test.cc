// EventLog: numbering, paging, the bounded ring and the follower wait; and
// the membership's events with their reasons, kept across a restart.
#include "server/events/event_log.h"

#include <thread>

#include "absl/time/clock.h"
#include "common/clock.h"
#include "gtest/gtest.h"
#include "server/membership/membership.h"
#include "tests/server/store/store_backends.h"
#include "tests/server/test_job.h"

namespace zshard::server {
namespace {

Event Ev(const std::string& kind) { return Event{1, 0, kind, "r"}; }

TEST(EventLogTest, NumbersPagesAndDropsTheOldest) {
  EventLog log(EventLogOptions{3});
  EXPECT_EQ(log.last_seq(), 0);
  for (const char* k : {"a", "b", "c", "d"}) log.Append(Ev(k));
  EXPECT_EQ(log.last_seq(), 4);
  EventPage all = log.After(0, 10);
  ASSERT_EQ(all.events.size(), 3u);  // "a" dropped by the ring
  EXPECT_EQ(all.events[0].kind, "b");
  EXPECT_EQ(all.events[0].seq, 2);
  EXPECT_FALSE(all.more);
  EventPage first = log.After(0, 2);
  ASSERT_EQ(first.events.size(), 2u);
  EXPECT_TRUE(first.more);
  EventPage next = log.After(first.next_seq, 2);
  ASSERT_EQ(next.events.size(), 1u);
  EXPECT_EQ(next.events[0].kind, "d");
  EXPECT_FALSE(next.more);
  EXPECT_EQ(log.After(4, 10).events.size(), 0u);
  EXPECT_EQ(log.After(4, 10).next_seq, 4);
}

TEST(EventLogTest, RestoredSeqsAreKeptAndContinued) {
  EventLog log;
  Event old = Ev("old");
  old.seq = 40;
  EXPECT_EQ(log.Append(old), 40);
  EXPECT_EQ(log.Append(Ev("new")), 41);
  EventPage page = log.After(39, 10);
  ASSERT_EQ(page.events.size(), 2u);
  EXPECT_EQ(page.events[1].seq, 41);
}

TEST(EventLogTest, WaitReturnsOnAppendAndOnShutdown) {
  EventLog log;
  std::thread writer([&] { log.Append(Ev("x")); });
  EventPage page = log.WaitAfter(0, 10, absl::Seconds(10));
  writer.join();
  ASSERT_EQ(page.events.size(), 1u);
  EXPECT_EQ(log.WaitAfter(1, 10, absl::ZeroDuration()).events.size(), 0u);
  log.Shutdown();
  absl::Time start = absl::Now();
  EXPECT_TRUE(log.WaitAfter(1, 10, absl::Seconds(10)).shutdown);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

class MembershipEventsTest
    : public ::testing::TestWithParam<testing::StoreKind> {
 protected:
  void SetUp() override {
    const std::string skip = testing::StoreSkipReason(GetParam());
    if (!skip.empty()) GTEST_SKIP() << skip;
  }
  testing::StoreLocation location_{GetParam()};
};

// The events of a membership change carry reasons that name the member,
// the lease and the world policy's inputs (over both stores).
TEST_P(MembershipEventsTest, ReasonsNameTheCauseAndSurviveARestart) {
  FakeClock clock(1000);
  int64_t last_seq = 0;
  job::JobSpec spec = testing::TestJob();
  // Every member falls silent at once below: their silence alone judges
  // them here, as with isolation off (IsolationTest covers the rule).
  spec.isolation_fraction = 1;
  {
    auto store = location_.Open().value();
    auto m = Membership::Create(spec, &clock, store.get()).value();
    auto a = m->Join({"w0", "127.0.0.1:1", {}, {}}).value();
    m->Join({"w1", "127.0.0.1:2", {}, {}}).value();
    m->Join({"w2", "127.0.0.1:3", {}, {}}).value();
    EventPage page = m->events()->After(0, 100);
    bool proposed = false;
    for (const Event& e : page.events) {
      if (e.kind == "propose") {
        proposed = true;
        EXPECT_NE(e.reason.find("world 2 = 1 instance(s) of D=2 within "
                                "[min 2, min(healthy 2, max 4)] (keep_d: D "
                                "fixed)"),
                  std::string::npos)
            << e.reason;
      }
    }
    EXPECT_TRUE(proposed);
    clock.AdvanceMs(6000);  // nobody heartbeats: every lease expires
    m->Tick();
    page = m->events()->After(0, 100);
    bool dead = false;
    for (const Event& e : page.events) {
      if (e.kind == "dead" && e.reason.find("w0") != std::string::npos) {
        dead = true;
        EXPECT_NE(e.reason.find("lease expired after 6000 ms without a "
                                "heartbeat"),
                  std::string::npos)
            << e.reason;
      }
    }
    EXPECT_TRUE(dead);
    last_seq = m->events()->last_seq();
    EXPECT_GT(last_seq, 4);
    (void)a;
  }
  auto store = location_.Open().value();
  auto m = Membership::Create(testing::TestJob(), &clock, store.get()).value();
  EventPage page = m->events()->After(0, 1000);
  ASSERT_GE(page.events.size(), static_cast<size_t>(last_seq));
  EXPECT_EQ(page.events[0].seq, 1);
  EXPECT_EQ(page.events[0].kind, "waiting");  // no member yet
  EXPECT_EQ(page.events[1].kind, "join");
  EXPECT_EQ(page.events[last_seq - 1].seq, last_seq);
  ASSERT_GT(page.events.size(), static_cast<size_t>(last_seq));
  EXPECT_EQ(page.events[last_seq].kind, "restart");
  EXPECT_EQ(page.events[last_seq].seq, last_seq + 1);
}

INSTANTIATE_TEST_SUITE_P(Stores, MembershipEventsTest,
                         ::testing::ValuesIn(testing::kStoreKinds),
                         testing::StoreKindName);

}  // namespace
}  // namespace zshard::server
