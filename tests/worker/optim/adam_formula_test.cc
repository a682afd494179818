// Tests of the one AdamW formula (AdamUpdate on floats) and of the per-step
// scalars against the independent long-double reference.
#include "client/worker/optim/adam_formula.h"

#include <ostream>
#include <random>

#include "client/worker/optim/adam.h"
#include "gtest/gtest.h"
#include "tests/worker/optim/adam_reference.h"
#include "tests/worker/optim/adam_test_util.h"

namespace zshard::optim {
namespace {

using testing::MakeRandomState;
using testing::RandomState;
using testing::RefAdamW;
using testing::RefState;
using testing::StepTolerance;
using testing::ToRef;

struct Case {
  AdamHyper hyper;
  bool decay;
  double grad_scale;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << "lr=" << c.hyper.lr << " b1=" << c.hyper.beta1
      << " b2=" << c.hyper.beta2 << " eps=" << c.hyper.eps
      << " wd=" << c.hyper.weight_decay << " decay=" << c.decay
      << " grad_scale=" << c.grad_scale;
}

class AdamFormulaTest : public ::testing::TestWithParam<Case> {};

TEST_P(AdamFormulaTest, MatchesLongDoubleReference) {
  const Case c = GetParam();
  std::mt19937 rng(42);
  for (long long t : {1LL, 2LL, 3LL, 10LL, 1000LL, 100000LL}) {
    auto params = MakeAdamStepParams(c.hyper, t, c.grad_scale);
    ASSERT_TRUE(params.ok()) << params.status();
    const float decay = c.decay ? params->decay : 1.0f;
    for (int i = 0; i < 5000; ++i) {
      const RandomState in = MakeRandomState(rng);
      float master = in.master, m = in.m, v = in.v;
      AdamUpdate<float>(*params, decay, in.grad, master, m, v);
      const long double g = (long double)in.grad;
      const RefState ref = RefAdamW(ToRef(c.hyper), c.decay, t, c.grad_scale, g,
                                    {in.master, in.m, in.v});
      const auto tol = StepTolerance(c.hyper, t, g * c.grad_scale, in, ref);
      ASSERT_NEAR(m, ref.m, tol.m) << "t=" << t << " i=" << i;
      ASSERT_NEAR(v, ref.v, tol.v) << "t=" << t << " i=" << i;
      ASSERT_NEAR(master, ref.p, tol.master) << "t=" << t << " i=" << i;
    }
  }
}

AdamHyper Hyper(double lr, double b1, double b2, double eps, double wd) {
  AdamHyper h;
  h.lr = lr;
  h.beta1 = b1;
  h.beta2 = b2;
  h.eps = eps;
  h.weight_decay = wd;
  return h;
}

INSTANTIATE_TEST_SUITE_P(
    Hypers, AdamFormulaTest,
    ::testing::Values(Case{Hyper(1e-3, 0.9, 0.999, 1e-8, 0.0), false, 1.0},
                      Case{Hyper(1e-3, 0.9, 0.999, 1e-8, 0.1), true, 1.0},
                      Case{Hyper(1e-3, 0.9, 0.999, 1e-8, 0.1), false, 1.0},
                      Case{Hyper(3e-4, 0.9, 0.95, 1e-6, 0.01), true, 1.0 / 64},
                      Case{Hyper(1e-2, 0.5, 0.9, 1e-3, 0.5), true, 0.37}));

// Runs several consecutive steps on one element and compares with the
// reference run from the same start (the states must not drift apart).
TEST(AdamFormulaSequenceTest, ManyStepsStayCloseToReference) {
  const AdamHyper h = Hyper(1e-3, 0.9, 0.999, 1e-8, 0.1);
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1e-2f);
  float master = 0.02f, m = 0.0f, v = 0.0f;
  RefState ref{0.02L, 0, 0};
  for (long long t = 1; t <= 200; ++t) {
    const float g = normal(rng);
    auto params = MakeAdamStepParams(h, t, 1.0);
    ASSERT_TRUE(params.ok());
    AdamUpdate<float>(*params, params->decay, g, master, m, v);
    ref = RefAdamW(ToRef(h), true, t, 1.0L, g, ref);
  }
  EXPECT_NEAR(master, ref.p, 1e-6L);
  EXPECT_NEAR(m, ref.m, 1e-5L * std::fabs(ref.m) + 1e-12L);
  EXPECT_NEAR(v, ref.v, 1e-5L * ref.v + 1e-15L);
}

// The formula also instantiates on long double: then only the fp32 per-step
// scalars (beta1 = 0.9f, ...) separate it from the reference.
TEST(AdamFormulaLongDoubleTest, InstantiatesOnLongDouble) {
  const AdamHyper h = Hyper(1e-3, 0.9, 0.999, 1e-8, 0.1);
  std::mt19937 rng(8);
  auto params = MakeAdamStepParams(h, 4, 1.0);
  ASSERT_TRUE(params.ok());
  for (int i = 0; i < 1000; ++i) {
    const RandomState in = MakeRandomState(rng);
    long double master = in.master, m = in.m, v = in.v;
    AdamUpdate<long double>(*params, params->decay, in.grad, master, m, v);
    const RefState ref =
        RefAdamW(ToRef(h), true, 4, 1.0L, in.grad, {in.master, in.m, in.v});
    const auto tol = StepTolerance(h, 4, in.grad, in, ref);
    ASSERT_NEAR(master, ref.p, tol.master) << i;
    ASSERT_NEAR(m, ref.m, tol.m) << i;
    ASSERT_NEAR(v, ref.v, tol.v) << i;
  }
}

TEST(AdamStepParamsTest, DerivesBiasCorrections) {
  const AdamHyper h = Hyper(2e-3, 0.9, 0.99, 1e-8, 0.05);
  auto s = MakeAdamStepParams(h, 2, 0.5);
  ASSERT_TRUE(s.ok());
  EXPECT_FLOAT_EQ(s->step_size, 2e-3 / (1 - 0.81));
  EXPECT_FLOAT_EQ(s->bias_correction2_sqrt, std::sqrt(1 - 0.99 * 0.99));
  EXPECT_FLOAT_EQ(s->decay, 1 - 2e-3 * 0.05);
  EXPECT_FLOAT_EQ(s->grad_scale, 0.5f);
  EXPECT_EQ(s->step, 2);
}

TEST(AdamStepParamsTest, RejectsBadInputs) {
  EXPECT_FALSE(MakeAdamStepParams(AdamHyper{}, 0, 1.0).ok());
  EXPECT_FALSE(MakeAdamStepParams(Hyper(-1, 0.9, 0.999, 1e-8, 0), 1, 1).ok());
  EXPECT_FALSE(MakeAdamStepParams(Hyper(1e-3, 1.0, 0.999, 1e-8, 0), 1, 1).ok());
  EXPECT_FALSE(MakeAdamStepParams(Hyper(1e-3, 0.9, -0.1, 1e-8, 0), 1, 1).ok());
  EXPECT_FALSE(MakeAdamStepParams(Hyper(1e-3, 0.9, 0.999, 0, 0), 1, 1).ok());
  EXPECT_FALSE(
      MakeAdamStepParams(Hyper(1e-3, 0.9, 0.999, 1e-8, -1), 1, 1).ok());
  EXPECT_FALSE(MakeAdamStepParams(AdamHyper{}, 1, std::nan("")).ok());
  auto bad = MakeAdamStepParams(Hyper(1e-3, 0.9, 0.999, 1e-8, 0), 1, INFINITY);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("grad_scale"), absl::string_view::npos);
}

TEST(GradScaleTest, DividesAndClips) {
  EXPECT_DOUBLE_EQ(GradScale(64, 0.5, 0.0), 1.0 / 64);  // no clipping
  EXPECT_DOUBLE_EQ(GradScale(64, 0.5, 1.0), 1.0 / 64);  // norm below clip
  EXPECT_DOUBLE_EQ(GradScale(4, 4.0, 1.0), 0.25 * (1.0 / (4.0 + 1e-6)));
  EXPECT_DOUBLE_EQ(GradScale(0, 1.0, 1.0), 0.0);
}

TEST(ValidateSegmentsTest, AcceptsSortedTablesAndRejectsOthers) {
  const Segment ok[] = {
      {0, 10, false, false}, {10, 12, false, true}, {20, 30, true, false}};
  EXPECT_TRUE(ValidateSegments(ok, 30).ok());
  EXPECT_TRUE(ValidateSegments({}, 5).ok());
  const Segment overlap[] = {{0, 10, false, false}, {9, 12, false, false}};
  EXPECT_FALSE(ValidateSegments(overlap, 30).ok());
  const Segment outside[] = {{0, 31, false, false}};
  EXPECT_FALSE(ValidateSegments(outside, 30).ok());
  const Segment reversed[] = {{5, 4, false, false}};
  EXPECT_FALSE(ValidateSegments(reversed, 30).ok());
}

}  // namespace
}  // namespace zshard::optim
