// PlanUpdateLog: numbered updates, the snapshot for new and lagging
// watchers, waits and shutdown.
#include "server/membership/plan_update_log.h"

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

TEST(PlanUpdateLogTest, ShutdownEndsWaits) {
  PlanUpdateLog log(8);
  log.Shutdown();
  WatchBatch b = log.Wait(0, absl::Hours(1));
  EXPECT_TRUE(b.shutdown);
  EXPECT_TRUE(b.updates.empty());
}

}  // namespace
}  // namespace zshard::server
