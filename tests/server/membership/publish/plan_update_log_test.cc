// PlanUpdateLog: numbered updates, the snapshot for new and lagging
// watchers (published together with the update), shown only once their
// store write is durable, waits and shutdown.
#include "server/membership/publish/plan_update_log.h"

#include <atomic>
#include <thread>

#include "absl/time/clock.h"
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
  log.Seal(0);  // no store write to wait for
  log.Publish(PlanPhase::kAbandoned, Plan(1), t);
  log.Seal(0);  // no store write to wait for
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
  log.Seal(0);  // no store write to wait for
  log.Publish(PlanPhase::kProposed, Plan(4), t);
  log.Seal(0);                     // no store write to wait for
  for (int64_t after : {-1, 0}) {  // new; behind the one kept update
    WatchBatch b = log.Wait(after, absl::ZeroDuration());
    ASSERT_EQ(b.updates.size(), 2u) << after;
    EXPECT_EQ(b.updates[0]->phase, PlanPhase::kStable);
    EXPECT_EQ(b.updates[0]->plan.epoch, 3);
    EXPECT_EQ(b.updates[1]->phase, PlanPhase::kProposed);
    EXPECT_EQ(b.updates[1]->seq, 2);
  }
}

// Workers resume on ABANDONED: a watcher that fell behind gets it before
// the next proposal, as the others did, or it would stay paused while they
// step; once an epoch commits, the older abandonment is no longer news.
TEST(PlanUpdateLogTest, TheSnapshotKeepsAnAbandonmentBeforeTheNextProposal) {
  PlanUpdateLog log(1);
  EpochTransition t;
  t.Restore(Plan(3), true, Plan(3), 4);
  ASSERT_TRUE(t.Propose(Plan(4)).ok());
  log.Publish(PlanPhase::kProposed, Plan(4), t);
  ASSERT_TRUE(t.Abandon("a member died").ok());
  log.Publish(PlanPhase::kAbandoned, Plan(4), t);
  ASSERT_TRUE(t.Propose(Plan(5)).ok());
  log.Publish(PlanPhase::kProposed, Plan(5), t);
  log.Seal(0);  // no store write to wait for
  WatchBatch b = log.Wait(-1, absl::ZeroDuration());
  ASSERT_EQ(b.updates.size(), 3u);
  EXPECT_EQ(b.updates[0]->phase, PlanPhase::kStable);
  EXPECT_EQ(b.updates[1]->phase, PlanPhase::kAbandoned);
  EXPECT_EQ(b.updates[1]->plan.epoch, 4);
  EXPECT_EQ(b.updates[2]->phase, PlanPhase::kProposed);
  EXPECT_EQ(b.updates[2]->plan.epoch, 5);
  t.Restore(Plan(5), true, Plan(5), 6);
  ASSERT_TRUE(t.Propose(Plan(6)).ok());
  log.Publish(PlanPhase::kProposed, Plan(6), t);
  log.Seal(0);  // no store write to wait for
  b = log.Wait(-1, absl::ZeroDuration());
  ASSERT_EQ(b.updates.size(), 2u);
  EXPECT_EQ(b.updates[0]->plan.epoch, 5);
  EXPECT_EQ(b.updates[1]->phase, PlanPhase::kProposed);
}

TEST(PlanUpdateLogTest, TheSnapshotSharesThePublishedUpdate) {
  PlanUpdateLog log(8);
  EpochTransition t;
  ASSERT_TRUE(t.Propose(Plan(1)).ok());
  log.Publish(PlanPhase::kProposed, Plan(1), t);
  log.Seal(0);  // no store write to wait for
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
      log.Seal(0);  // no store write to wait for
      absl::StatusOr<EpochPlan> abandoned = t.Abandon("next");
      ASSERT_TRUE(abandoned.ok());
      log.Publish(PlanPhase::kAbandoned, *abandoned, t);
      log.Seal(0);  // no store write to wait for
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

// A leader killed between its commit and the commit's store write must not
// have told any watcher of the epoch: updates wait for their write.
TEST(PlanUpdateLogTest, UpdatesWaitUntilTheirStoreWriteIsDurable) {
  PlanUpdateLog log(8);
  EpochTransition t;
  ASSERT_TRUE(t.Propose(Plan(1)).ok());
  log.Publish(PlanPhase::kProposed, Plan(1), t);
  EXPECT_TRUE(log.Wait(-1, absl::ZeroDuration()).updates.empty());  // staged
  log.Seal(3);  // its change is the writer's ticket 3
  ASSERT_TRUE(t.Abandon("a member died").ok());
  log.Publish(PlanPhase::kAbandoned, Plan(1), t);
  log.Seal(4);
  log.Release(2);  // an earlier write: nothing of these yet
  EXPECT_TRUE(log.Wait(0, absl::ZeroDuration()).updates.empty());
  EXPECT_TRUE(log.Wait(-1, absl::ZeroDuration()).updates.empty());
  log.Release(3);
  WatchBatch b = log.Wait(0, absl::ZeroDuration());
  ASSERT_EQ(b.updates.size(), 1u);
  EXPECT_EQ(b.updates[0]->phase, PlanPhase::kProposed);
  EXPECT_EQ(b.last_seq, 1);
  // A new watcher's snapshot is the one staged with the shown update.
  b = log.Wait(-1, absl::ZeroDuration());
  ASSERT_EQ(b.updates.size(), 1u);
  EXPECT_EQ(b.updates[0]->phase, PlanPhase::kProposed);
  // A waiter wakes when the next write is durable.
  std::thread writer([&log] {
    absl::SleepFor(absl::Milliseconds(20));
    log.Release(4);
  });
  b = log.Wait(1, absl::Seconds(30));
  writer.join();
  ASSERT_EQ(b.updates.size(), 1u);
  EXPECT_EQ(b.updates[0]->phase, PlanPhase::kAbandoned);
  EXPECT_EQ(b.last_seq, 2);
  // Sealed after its ticket became durable: shown at once.
  log.Snapshot(t);
  log.Seal(4);
  EXPECT_EQ(log.Wait(-1, absl::ZeroDuration()).updates.size(), 1u);
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
