// LearningRate: warmup, then constant, cosine or linear decay to min_lr, as
// the job spec documents; and the schedule's checks.
#include "common/job/lr_schedule.h"

#include <gtest/gtest.h>

#include <cmath>

namespace zshard::job {
namespace {

constexpr double kLr = 0.01;

LrSchedule Decay(LrScheduleKind kind) {
  LrSchedule s;
  s.kind = kind;
  s.warmup_steps = 5;
  s.decay_steps = 55;
  s.min_lr = 0.001;
  return s;
}

TEST(LrScheduleTest, ConstantIsTheRateAfterWarmup) {
  LrSchedule s;
  EXPECT_EQ(LearningRate(s, kLr, 1), kLr);
  EXPECT_EQ(LearningRate(s, kLr, 1000000), kLr);
  s.warmup_steps = 4;
  EXPECT_DOUBLE_EQ(LearningRate(s, kLr, 1), kLr / 4);
  EXPECT_DOUBLE_EQ(LearningRate(s, kLr, 2), kLr / 2);
  EXPECT_EQ(LearningRate(s, kLr, 4), kLr);
  EXPECT_EQ(LearningRate(s, kLr, 5), kLr);
}

TEST(LrScheduleTest, CosineFollowsTheFormula) {
  const LrSchedule s = Decay(LrScheduleKind::kCosine);
  EXPECT_DOUBLE_EQ(LearningRate(s, kLr, 1), 0.002);
  EXPECT_DOUBLE_EQ(LearningRate(s, kLr, 5), kLr);
  // r = 0.2 and 0.5.
  EXPECT_DOUBLE_EQ(LearningRate(s, kLr, 15),
                   0.001 + 0.009 * 0.5 * (1 + std::cos(M_PI * 0.2)));
  EXPECT_NEAR(LearningRate(s, kLr, 30), 0.0055, 1e-15);
  EXPECT_DOUBLE_EQ(LearningRate(s, kLr, 55), 0.001);
  EXPECT_EQ(LearningRate(s, kLr, 56), 0.001);
  // Never increases after the warmup.
  for (int64_t t = 6; t < 60; ++t) {
    EXPECT_LE(LearningRate(s, kLr, t), LearningRate(s, kLr, t - 1)) << t;
  }
}

TEST(LrScheduleTest, LinearFollowsTheFormula) {
  const LrSchedule s = Decay(LrScheduleKind::kLinear);
  EXPECT_DOUBLE_EQ(LearningRate(s, kLr, 3), 0.006);
  EXPECT_DOUBLE_EQ(LearningRate(s, kLr, 15), 0.001 + 0.009 * 0.8);
  EXPECT_DOUBLE_EQ(LearningRate(s, kLr, 30), 0.0055);
  EXPECT_DOUBLE_EQ(LearningRate(s, kLr, 55), 0.001);
  EXPECT_EQ(LearningRate(s, kLr, 1000), 0.001);
}

TEST(LrScheduleTest, ChecksNameTheField) {
  EXPECT_TRUE(ValidateLrSchedule(Decay(LrScheduleKind::kCosine), kLr).ok());
  LrSchedule s = Decay(LrScheduleKind::kCosine);
  s.decay_steps = 5;
  EXPECT_NE(ValidateLrSchedule(s, kLr).message().find("decay_steps"),
            std::string::npos);
  s = Decay(LrScheduleKind::kLinear);
  s.min_lr = 0.02;
  EXPECT_NE(ValidateLrSchedule(s, kLr).message().find("min_lr"),
            std::string::npos);
  s = LrSchedule{};
  s.decay_steps = 3;
  EXPECT_FALSE(ValidateLrSchedule(s, kLr).ok());
  s = LrSchedule{};
  s.warmup_steps = -1;
  EXPECT_NE(ValidateLrSchedule(s, kLr).message().find("warmup_steps"),
            std::string::npos);
  EXPECT_EQ(ParseLrScheduleKind("cosine").value(), LrScheduleKind::kCosine);
  EXPECT_FALSE(ParseLrScheduleKind("Cosine").ok());
}

}  // namespace
}  // namespace zshard::job
