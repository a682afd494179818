#include "common/status.h"

#include <gtest/gtest.h>

#include "common/clock.h"

namespace zshard {
namespace {

absl::StatusOr<int> Half(int x) {
  if (x % 2 != 0) return absl::InvalidArgumentError("odd");
  return x / 2;
}

absl::StatusOr<int> Quarter(int x) {
  ZSHARD_ASSIGN_OR_RETURN(int h, Half(x));
  ZSHARD_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

absl::Status CheckEven(int x) {
  ZSHARD_RETURN_IF_ERROR(Half(x).status());
  return absl::OkStatus();
}

TEST(StatusMacros, PropagateErrorsAndValues) {
  EXPECT_EQ(*Quarter(8), 2);
  EXPECT_EQ(Quarter(6).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(CheckEven(4).ok());
  EXPECT_FALSE(CheckEven(3).ok());
}

TEST(FakeClock, MovesOnlyWhenTold) {
  FakeClock clock(100);
  EXPECT_EQ(clock.NowMs(), 100);
  clock.AdvanceMs(50);
  EXPECT_EQ(clock.NowMs(), 150);
}

}  // namespace
}  // namespace zshard
