// Tests of the idle workload: steps only while active, stops at a step
// boundary, resumes from a given step, and reports done.

#include "client/worker/workload/idle_workload.h"

#include "gtest/gtest.h"
#include "tests/testing/wait_for.h"

namespace zshard::worker {
namespace {

using ::zshard::testing::WaitFor;

TEST(IdleWorkloadTest, StepsOnlyWhileActive) {
  IdleWorkload workload({/*step_delay_ms=*/1, /*steps=*/0});
  EXPECT_FALSE(workload.active());
  EXPECT_EQ(workload.step(), 0);
  workload.Activate(10);
  ASSERT_TRUE(WaitFor([&] { return workload.step() >= 13; }, 5000, 1));
  const int64_t paused_at = workload.Pause();
  EXPECT_GE(paused_at, 13);
  EXPECT_FALSE(workload.active());
  // Paused: the step no longer moves, however long one waits for it.
  EXPECT_FALSE(WaitFor([&] { return workload.step() != paused_at; }, 30, 1));
  EXPECT_FALSE(workload.done());
}

TEST(IdleWorkloadTest, PauseDoesNotWaitForTheDelay) {
  IdleWorkload workload({/*step_delay_ms=*/60000, /*steps=*/0});
  workload.Activate(5);
  EXPECT_EQ(workload.Pause(), 5);
  // Re-activation restarts from the given step.
  workload.Activate(2);
  EXPECT_EQ(workload.step(), 2);
}

TEST(IdleWorkloadTest, DoneAfterSteps) {
  IdleWorkload workload({/*step_delay_ms=*/0, /*steps=*/20});
  EXPECT_FALSE(workload.WaitDone(1));
  workload.Activate(0);
  ASSERT_TRUE(workload.WaitDone(5000));
  EXPECT_EQ(workload.step(), 20);
  EXPECT_TRUE(workload.done());
}

}  // namespace
}  // namespace zshard::worker
