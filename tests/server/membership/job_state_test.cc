// JobState: the job's table of allowed and refused steps, and what the
// state keeps across them.
#include "server/membership/job_state.h"

#include <map>
#include <utility>

#include "gtest/gtest.h"

namespace zshard::server {
namespace {

using P = JobPhase;
using E = JobEvent;

const P kPhases[] = {P::kRunning, P::kFinished, P::kFailed};
const E kEvents[] = {E::kFinish, E::kFail};

// Every allowed step; the rest of the table is refused.
const std::map<std::pair<P, E>, P>& Allowed() {
  static const auto* allowed = new std::map<std::pair<P, E>, P>{
      {{P::kRunning, E::kFinish}, P::kFinished},
      {{P::kRunning, E::kFail}, P::kFailed},
      {{P::kFinished, E::kFail}, P::kFailed},
  };
  return *allowed;
}

TEST(JobStateTest, AllowedStepsLeadWhereTheTableSays) {
  for (const auto& [from, to] : Allowed()) {
    std::optional<P> next = NextJobPhase(from.first, from.second);
    ASSERT_TRUE(next.has_value())
        << JobPhaseName(from.first) << " " << JobEventName(from.second);
    EXPECT_EQ(*next, to) << JobPhaseName(from.first) << " "
                         << JobEventName(from.second);
  }
}

TEST(JobStateTest, EveryOtherStepIsRefused) {
  int refused = 0;
  for (P phase : kPhases) {
    for (E event : kEvents) {
      if (Allowed().count({phase, event}) > 0) continue;
      EXPECT_FALSE(NextJobPhase(phase, event).has_value())
          << JobPhaseName(phase) << " " << JobEventName(event);
      ++refused;
    }
  }
  EXPECT_EQ(refused, 3);
}

TEST(JobStateTest, AFailureKeepsItsFirstReason) {
  JobState job;
  EXPECT_TRUE(job.running());
  EXPECT_EQ(job.failure_reason(), "");
  EXPECT_TRUE(job.Fail("range 3 lost"));
  EXPECT_TRUE(job.failed());
  EXPECT_FALSE(job.Fail("later"));
  EXPECT_FALSE(job.Finish());
  EXPECT_EQ(job.phase(), P::kFailed);
  EXPECT_EQ(job.failure_reason(), "range 3 lost");
}

TEST(JobStateTest, AFinishedJobCanStillFail) {
  JobState job;
  EXPECT_TRUE(job.Finish());
  EXPECT_TRUE(job.finished());
  EXPECT_FALSE(job.Finish());
  EXPECT_EQ(job.failure_reason(), "");
  EXPECT_TRUE(job.Fail("no checkpoint"));
  EXPECT_TRUE(job.failed());
  EXPECT_FALSE(job.finished());
}

TEST(JobStateTest, RestoreTakesTheStoredFlags) {
  JobState job;
  job.Restore(/*finished=*/true, /*failed=*/false, "ignored");
  EXPECT_TRUE(job.finished());
  EXPECT_EQ(job.failure_reason(), "");
  job.Restore(/*finished=*/true, /*failed=*/true, "lost");
  EXPECT_TRUE(job.failed());
  EXPECT_EQ(job.failure_reason(), "lost");
  job.Restore(/*finished=*/false, /*failed=*/false, "");
  EXPECT_TRUE(job.running());
}

TEST(JobStateTest, NamesAreDistinct) {
  EXPECT_STREQ(JobPhaseName(P::kRunning), "RUNNING");
  EXPECT_STREQ(JobPhaseName(P::kFinished), "FINISHED");
  EXPECT_STREQ(JobPhaseName(P::kFailed), "FAILED");
  EXPECT_STREQ(JobEventName(E::kFinish), "finish");
  EXPECT_STREQ(JobEventName(E::kFail), "fail");
}

}  // namespace
}  // namespace zshard::server
