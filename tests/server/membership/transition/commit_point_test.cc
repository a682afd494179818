// ResolveCommitPoint: the table of PREPARED ack combinations.
#include "server/membership/transition/commit_point.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace zshard::server {
namespace {

PreparedAck At(int64_t step, int64_t adam, std::vector<double> values = {}) {
  PreparedAck a;
  a.step = step;
  a.adam_step = adam;
  a.commit_values = std::move(values);
  return a;
}

PreparedAck Pending(int64_t step, int64_t adam) {
  PreparedAck a = At(step, adam);
  a.commit_pending = true;
  return a;
}

TEST(CommitPointTest, WithoutHoldersTheHighestStepOfAnyoneCounts) {
  auto c = ResolveCommitPoint({}, {At(3, 3), At(9, 8)});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->resume_step, 9);
  EXPECT_EQ(c->resume_adam_step, 8);
  EXPECT_FALSE(c->finish_pending_step);
}

TEST(CommitPointTest, HoldersAtOneStepResumeThere) {
  auto c = ResolveCommitPoint({At(7, 6), At(7, 6)}, {At(100, 100)});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->resume_step, 7);
  EXPECT_EQ(c->resume_adam_step, 6);  // a skipped step is skipped everywhere
  EXPECT_FALSE(c->finish_pending_step);
}

TEST(CommitPointTest, PendingRankOneBehindFinishesWithTheValuesOfAPassedRank) {
  auto c =
      ResolveCommitPoint({At(8, 8, {0, 2.25}), Pending(7, 7), At(8, 8)}, {});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->resume_step, 8);
  EXPECT_EQ(c->resume_adam_step, 8);
  EXPECT_TRUE(c->finish_pending_step);
  EXPECT_THAT(c->commit_values, ::testing::ElementsAre(0, 2.25));
}

TEST(CommitPointTest, EveryonePendingAtTheSameStepDropsThePendingStep) {
  auto c = ResolveCommitPoint({Pending(5, 5), Pending(5, 5)}, {});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->resume_step, 5);
  EXPECT_FALSE(c->finish_pending_step);
}

TEST(CommitPointTest, ConflictsAreRefused) {
  // Two steps apart.
  EXPECT_EQ(ResolveCommitPoint({At(8, 8), At(6, 6)}, {}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  // One behind without commit_pending: it never contributed to step 8.
  EXPECT_EQ(ResolveCommitPoint({At(8, 8), At(7, 7)}, {}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  // Pending one behind, but nobody ahead reported the commit values.
  auto no_values = ResolveCommitPoint({At(8, 8), Pending(7, 7)}, {});
  EXPECT_EQ(no_values.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(no_values.status().message()),
              ::testing::HasSubstr("commit values"));
  // Same step, different Adam steps.
  EXPECT_EQ(ResolveCommitPoint({At(8, 8), At(8, 7)}, {}).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace zshard::server
