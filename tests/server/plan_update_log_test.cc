// PlanUpdateLog: numbered updates, the snapshot for new and lagging
// watchers (published together with the update), waits and shutdown.
#include "server/membership/plan_update_log.h"

#include <atomic>
#include <thread>

#include "gtest/gtest.h"

namespace zshard::server {
namespace {

EpochPlan Plan(int64_t epoch) {
  EpochPlan p;
  p.epoch = epoch;
  return p;
}

TEST(PlanUpdateLogTest, WatchersGetUpdatesAfterTheirSeq) {
  PlanUpdateLog log(8);
  EpochTransition t;
  ASSERT_TRUE(t.Propose(Plan(1)).ok());
  log.Publish(PlanPhase::kProposed, Plan(1), t);
  log.Publish(PlanPhase::kAbandoned, Plan(1), t);
  WatchBatch b = log.Wait(0, absl::ZeroDuration());
  ASSERT_EQ(b.updates.size(), 2u);
  EXPECT_EQ(b.updates[0]->seq, 1);
  EXPECT_EQ(b.updates[1]->phase, PlanPhase::kAbandoned);
  EXPECT_EQ(b.last_seq, 2);
  EXPECT_TRUE(log.Wait(2, absl::ZeroDuration()).updates.empty());
}

TEST(PlanUpdateLogTest, NewAndLaggingWatchersGetTheSnapshot) {
  PlanUpdateLog log(1);
  EpochTransition t;
  t.Restore(Plan(3), true, Plan(3), 4);
  ASSERT_TRUE(t.Propose(Plan(4)).ok());
  log.Publish(PlanPhase::kStable, Plan(3), t);
  log.Publish(PlanPhase::kProposed, Plan(4), t);
  for (int64_t after : {-1, 0}) {  // new; behind the one kept update
    WatchBatch b = log.Wait(after, absl::ZeroDuration());
    ASSERT_EQ(b.updates.size(), 2u) << after;
    EXPECT_EQ(b.updates[0]->phase, PlanPhase::kStable);
    EXPECT_EQ(b.updates[0]->plan.epoch, 3);
    EXPECT_EQ(b.updates[1]->phase, PlanPhase::kProposed);
    EXPECT_EQ(b.updates[1]->seq, 2);
  }
}

TEST(PlanUpdateLogTest, TheSnapshotSharesThePublishedUpdate) {
  PlanUpdateLog log(8);
  EpochTransition t;
  ASSERT_TRUE(t.Propose(Plan(1)).ok());
  log.Publish(PlanPhase::kProposed, Plan(1), t);
  const WatchBatch from_log = log.Wait(0, absl::ZeroDuration());
  const WatchBatch snapshot = log.Wait(-1, absl::ZeroDuration());
  ASSERT_EQ(from_log.updates.size(), 1u);
  ASSERT_EQ(snapshot.updates.size(), 1u);
  // One object: a watcher's bytes of it are encoded once.
  EXPECT_EQ(snapshot.updates[0].get(), from_log.updates[0].get());
}

// A watcher that reads the snapshot while updates are published never gets
// one older than the last seq it is told (it would wait after that seq and
// miss the newer update for good).
TEST(PlanUpdateLogTest, SnapshotAndLastSeqAppearTogether) {
  PlanUpdateLog log(4);
  EpochTransition t;
  EpochPlan big = Plan(0);
  big.slots.resize(4000);  // copies take a while: a wide window if racy
  constexpr int kEpochs = 200;
  std::atomic<bool> done{false};
  std::thread publisher([&] {
    for (int e = 1; e <= kEpochs; ++e) {
      EpochPlan p = big;
      p.epoch = e;
      ASSERT_TRUE(t.Propose(p).ok());
      log.Publish(PlanPhase::kProposed, p, t);
      absl::StatusOr<EpochPlan> abandoned = t.Abandon("next");
      ASSERT_TRUE(abandoned.ok());
      log.Publish(PlanPhase::kAbandoned, *abandoned, t);
    }
    done = true;
  });
  int64_t reads = 0, stale = 0;
  while (!done) {
    const WatchBatch b = log.Wait(-1, absl::ZeroDuration());
    if (b.updates.empty()) continue;
    ++reads;
    // The pending update is the latest one published.
    if (b.updates.back()->seq != b.last_seq) ++stale;
  }
  publisher.join();
  EXPECT_GT(reads, 0);
  EXPECT_EQ(stale, 0) << "of " << reads << " snapshot reads";
  const WatchBatch last = log.Wait(-1, absl::ZeroDuration());
  ASSERT_EQ(last.updates.size(), 1u);
  EXPECT_EQ(last.updates[0]->seq, 2 * kEpochs);
  EXPECT_EQ(last.updates[0]->phase, PlanPhase::kAbandoned);
}

TEST(PlanUpdateLogTest, ShutdownEndsWaits) {
  PlanUpdateLog log(8);
  log.Shutdown();
  WatchBatch b = log.Wait(0, absl::Hours(1));
  EXPECT_TRUE(b.shutdown);
  EXPECT_TRUE(b.updates.empty());
}

}  // namespace
}  // namespace zshard::server
