// Tests of the idle runner: steps only while active, stops at a step
// boundary, resumes from a given step, and reports done.

#include "client/worker/runner/idle_runner.h"

#include "gtest/gtest.h"
#include "tests/testing/wait_for.h"

namespace zshard::worker {
namespace {

using ::zshard::testing::WaitFor;

TEST(IdleRunnerTest, StepsOnlyWhileActive) {
  IdleRunner runner({/*step_delay_ms=*/1, /*steps=*/0});
  EXPECT_FALSE(runner.active());
  EXPECT_EQ(runner.step(), 0);
  runner.Activate(10);
  ASSERT_TRUE(WaitFor([&] { return runner.step() >= 13; }, 5000, 1));
  const int64_t paused_at = runner.Pause();
  EXPECT_GE(paused_at, 13);
  EXPECT_FALSE(runner.active());
  // Paused: the step no longer moves, however long one waits for it.
  EXPECT_FALSE(WaitFor([&] { return runner.step() != paused_at; }, 30, 1));
  EXPECT_FALSE(runner.done());
}

TEST(IdleRunnerTest, PauseDoesNotWaitForTheDelay) {
  IdleRunner runner({/*step_delay_ms=*/60000, /*steps=*/0});
  runner.Activate(5);
  EXPECT_EQ(runner.Pause(), 5);
  // Re-activation restarts from the given step.
  runner.Activate(2);
  EXPECT_EQ(runner.step(), 2);
}

TEST(IdleRunnerTest, DoneAfterSteps) {
  IdleRunner runner({/*step_delay_ms=*/0, /*steps=*/20});
  EXPECT_FALSE(runner.WaitDone(1));
  runner.Activate(0);
  ASSERT_TRUE(runner.WaitDone(5000));
  EXPECT_EQ(runner.step(), 20);
  EXPECT_TRUE(runner.done());
}

}  // namespace
}  // namespace zshard::worker
