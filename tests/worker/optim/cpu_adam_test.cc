// Tests of CpuAdam: every code path this CPU runs against the long-double
// reference for every grad/param dtype, paths and thread counts bit-identical
// to each other, and the segment table (no weight decay, padding untouched).
#include "client/worker/optim/cpu_adam.h"

#include <cstring>
#include <random>
#include <vector>

#include "client/worker/optim/float_bits.h"
#include "gtest/gtest.h"
#include "tests/worker/optim/adam_reference.h"
#include "tests/worker/optim/adam_test_util.h"

namespace zshard::optim {
namespace {

using plan::DType;
using testing::MakeRandomState;
using testing::RandomState;
using testing::RefAdamW;
using testing::RefRoundBf16;
using testing::RefRoundFp16;
using testing::RefState;
using testing::StepTolerance;
using testing::ToRef;

std::vector<CpuAdamPath> SupportedPaths() {
  std::vector<CpuAdamPath> paths;
  for (CpuAdamPath p : {CpuAdamPath::kScalar, CpuAdamPath::kVec128,
                        CpuAdamPath::kAvx2, CpuAdamPath::kAvx512}) {
    if (CpuAdamPathSupported(p)) paths.push_back(p);
  }
  return paths;
}

int Bytes(DType d) { return d == DType::kFp32 ? 4 : 2; }

const char* Name(DType d) {
  return d == DType::kBf16 ? "bf16" : d == DType::kFp16 ? "fp16" : "fp32";
}

uint16_t RoundTo16(float x, DType d) {
  return static_cast<uint16_t>(d == DType::kBf16 ? FloatToBf16Bits(x)
                                                 : FloatToHalfBits(x));
}

// Element i of a 16/32-bit buffer as a long double.
long double ValueAt(const std::vector<uint8_t>& buf, DType d, int64_t i) {
  if (d == DType::kFp32) {
    float f;
    std::memcpy(&f, buf.data() + 4 * i, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, buf.data() + 2 * i, 2);
  return d == DType::kBf16 ? (long double)testing::FloatFromBf16(h)
                           : testing::FloatFromFp16(h);
}

// A slice of n random elements with grads stored as grad_dtype.
struct Slice {
  std::vector<RandomState> in;
  std::vector<float> master, m, v;
  std::vector<uint8_t> grad, param;

  Slice(int64_t n, DType grad_dtype, DType param_dtype, uint32_t seed)
      : grad(n * Bytes(grad_dtype)), param(n * Bytes(param_dtype), 0xAB) {
    std::mt19937 rng(seed);
    for (int64_t i = 0; i < n; ++i) {
      RandomState s = MakeRandomState(rng);
      if (grad_dtype == DType::kFp32) {
        std::memcpy(grad.data() + 4 * i, &s.grad, 4);
      } else {
        const uint16_t h = RoundTo16(s.grad, grad_dtype);
        std::memcpy(grad.data() + 2 * i, &h, 2);
        s.grad = static_cast<float>(ValueAt(grad, grad_dtype, i));
      }
      in.push_back(s);
      master.push_back(s.master);
      m.push_back(s.m);
      v.push_back(s.v);
    }
  }
};

absl::Status Step(CpuAdam& adam, const AdamStepParams& p,
                  absl::Span<const Segment> segs, Slice& s, DType g, DType pd) {
  return adam.Update(p, segs, s.master.data(), s.m.data(), s.v.data(),
                     s.grad.data(), g, s.param.data(), pd,
                     static_cast<int64_t>(s.master.size()));
}

std::unique_ptr<CpuAdam> MakeAdam(CpuAdamPath path, int threads,
                                  int64_t min_per_thread = 32768,
                                  int64_t chunk = 65536) {
  CpuAdamOptions options;
  options.path = path;
  options.num_threads = threads;
  options.min_elements_per_thread = min_per_thread;
  options.chunk_elements = chunk;
  auto adam = CpuAdam::Create(options);
  EXPECT_TRUE(adam.ok()) << adam.status();
  return std::move(adam).value();
}

AdamHyper DecayHyper() {
  AdamHyper h;
  h.lr = 1e-3;
  h.weight_decay = 0.1;
  return h;
}

TEST(CpuAdamTest, EveryPathAndDtypeMatchesReference) {
  const AdamHyper hyper = DecayHyper();
  const int64_t n = 1003;  // whole vectors plus a tail
  for (CpuAdamPath path : SupportedPaths()) {
    auto adam = MakeAdam(path, 1);
    for (DType gd : {DType::kBf16, DType::kFp16, DType::kFp32}) {
      for (DType pd : {DType::kBf16, DType::kFp16, DType::kFp32}) {
        SCOPED_TRACE(std::string(CpuAdamPathName(path)) + " grad " + Name(gd) +
                     " param " + Name(pd));
        Slice s(n, gd, pd, 5);
        const Segment segs[] = {{0, 500, false, false}, {500, n, true, false}};
        auto params = MakeAdamStepParams(hyper, 7, 0.5);
        ASSERT_TRUE(params.ok());
        ASSERT_TRUE(Step(*adam, *params, segs, s, gd, pd).ok());
        for (int64_t i = 0; i < n; ++i) {
          const RandomState& in = s.in[i];
          const bool decay = i < 500;
          const RefState ref = RefAdamW(ToRef(hyper), decay, 7, 0.5L, in.grad,
                                        {in.master, in.m, in.v});
          const auto tol = StepTolerance(hyper, 7, in.grad * 0.5L, in, ref);
          ASSERT_NEAR(s.master[i], ref.p, tol.master) << i;
          ASSERT_NEAR(s.m[i], ref.m, tol.m) << i;
          ASSERT_NEAR(s.v[i], ref.v, tol.v) << i;
          const long double want = pd == DType::kFp32 ? (long double)s.master[i]
                                   : pd == DType::kBf16
                                       ? RefRoundBf16(s.master[i])
                                       : RefRoundFp16(s.master[i]);
          ASSERT_EQ(ValueAt(s.param, pd, i), want) << i;
        }
      }
    }
  }
}

// All paths and thread counts give the same bits.
TEST(CpuAdamTest, PathsAndThreadCountsAreBitIdentical) {
  const int64_t n = 30000 + 13;
  auto params = MakeAdamStepParams(DecayHyper(), 3, 1.0 / 64);
  ASSERT_TRUE(params.ok());
  const Segment segs[] = {{0, 7, true, false},
                          {64, 15000, false, false},
                          {15000, 15100, false, true},
                          {15100, n, true, false}};
  const Slice start(n, DType::kBf16, DType::kBf16, 9);
  Slice want = start;
  auto reference = MakeAdam(CpuAdamPath::kScalar, 1);
  ASSERT_TRUE(
      Step(*reference, *params, segs, want, DType::kBf16, DType::kBf16).ok());
  for (CpuAdamPath path : SupportedPaths()) {
    for (int threads : {1, 2, 3, 5}) {
      SCOPED_TRACE(std::string(CpuAdamPathName(path)) + " threads " +
                   std::to_string(threads));
      // Small chunks cut the runs at many places.
      auto adam = MakeAdam(path, threads, 1000, threads == 1 ? 65536 : 100);
      Slice got = start;
      ASSERT_TRUE(
          Step(*adam, *params, segs, got, DType::kBf16, DType::kBf16).ok());
      ASSERT_EQ(std::memcmp(got.master.data(), want.master.data(), 4 * n), 0);
      ASSERT_EQ(std::memcmp(got.m.data(), want.m.data(), 4 * n), 0);
      ASSERT_EQ(std::memcmp(got.v.data(), want.v.data(), 4 * n), 0);
      ASSERT_EQ(got.param, want.param);
    }
  }
}

TEST(CpuAdamTest, PaddingAndUncoveredElementsAreUntouched) {
  const int64_t n = 300;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (CpuAdamPath path : SupportedPaths()) {
    auto adam = MakeAdam(path, 2, 16);
    Slice s(n, DType::kBf16, DType::kBf16, 1);
    // Padding and the gap [200, 210) hold NaN grads: any read would show.
    for (int64_t i = 100; i < 140; ++i) s.master[i] = s.m[i] = s.v[i] = nan;
    const uint16_t nan_bits = 0x7FC0;
    for (int64_t i : {100, 139, 200, 209}) {
      std::memcpy(s.grad.data() + 2 * i, &nan_bits, 2);
    }
    const Slice before = s;
    const Segment segs[] = {{0, 100, false, false},
                            {100, 140, false, true},
                            {140, 200, true, false},
                            {210, n, false, false}};
    auto params = MakeAdamStepParams(DecayHyper(), 1, 1.0);
    ASSERT_TRUE(params.ok());
    ASSERT_TRUE(Step(*adam, *params, segs, s, DType::kBf16, DType::kBf16).ok());
    for (int64_t i = 0; i < n; ++i) {
      const bool untouched = (i >= 100 && i < 140) || (i >= 200 && i < 210);
      const bool same_param = std::memcmp(s.param.data() + 2 * i,
                                          before.param.data() + 2 * i, 2) == 0;
      ASSERT_EQ(same_param, untouched) << CpuAdamPathName(path) << " " << i;
      if (untouched) {
        ASSERT_EQ(std::memcmp(&s.master[i], &before.master[i], 4), 0) << i;
        ASSERT_EQ(std::memcmp(&s.m[i], &before.m[i], 4), 0) << i;
        ASSERT_EQ(std::memcmp(&s.v[i], &before.v[i], 4), 0) << i;
      } else {
        ASSERT_FALSE(std::isnan(s.master[i])) << i;
      }
    }
  }
}

TEST(CpuAdamTest, NoWeightDecaySegmentsSkipDecay) {
  AdamHyper hyper = DecayHyper();
  hyper.weight_decay = 0.5;
  const int64_t n = 64;
  Slice with(n, DType::kFp32, DType::kFp32, 2);
  Slice without(n, DType::kFp32, DType::kFp32, 2);
  auto adam = MakeAdam(CpuAdamPath::kAuto, 1);
  auto params = MakeAdamStepParams(hyper, 1, 1.0);
  ASSERT_TRUE(params.ok());
  const Segment decayed[] = {{0, n, false, false}};
  const Segment kept[] = {{0, n, true, false}};
  ASSERT_TRUE(
      Step(*adam, *params, decayed, with, DType::kFp32, DType::kFp32).ok());
  ASSERT_TRUE(
      Step(*adam, *params, kept, without, DType::kFp32, DType::kFp32).ok());
  for (int64_t i = 0; i < n; ++i) {
    // Decoupled decay shrinks the param by lr * wd * p before the update.
    const long double shrink = 1e-3L * 0.5L * with.in[i].master;
    // Both results are rounded to fp32: allow a few ulps of the larger.
    const long double ulp =
        std::ldexp(1.0L, -23) *
        std::max(std::fabs(with.master[i]), std::fabs(without.master[i]));
    ASSERT_NEAR(without.master[i] - with.master[i], shrink,
                4 * ulp + 1e-6L * std::fabs(shrink))
        << i;
  }
}

TEST(CpuAdamTest, FullRangeWhenTableIsEmptyAndFp32InPlace) {
  const int64_t n = 77;
  Slice s(n, DType::kFp32, DType::kFp32, 4);
  auto adam = MakeAdam(CpuAdamPath::kAuto, 2, 8);
  auto params = MakeAdamStepParams(DecayHyper(), 1, 1.0);
  ASSERT_TRUE(params.ok());
  // The fp32 param is its own master: param_out aliases master.
  ASSERT_TRUE(adam->Update(*params, {}, s.master.data(), s.m.data(), s.v.data(),
                           s.grad.data(), DType::kFp32, s.master.data(),
                           DType::kFp32, n)
                  .ok());
  for (int64_t i = 0; i < n; ++i) {
    const RandomState& in = s.in[i];
    const RefState ref = RefAdamW(ToRef(DecayHyper()), true, 1, 1.0L, in.grad,
                                  {in.master, in.m, in.v});
    const auto tol = StepTolerance(DecayHyper(), 1, in.grad, in, ref);
    ASSERT_NEAR(s.master[i], ref.p, tol.master) << i;
  }
}

TEST(CpuAdamTest, RejectsBadArguments) {
  auto adam = MakeAdam(CpuAdamPath::kAuto, 1);
  AdamStepParams p;
  Slice s(10, DType::kBf16, DType::kBf16, 1);
  const Segment outside[] = {{0, 11, false, false}};
  EXPECT_EQ(Step(*adam, p, outside, s, DType::kBf16, DType::kBf16).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(adam->Update(p, {}, nullptr, s.m.data(), s.v.data(), s.grad.data(),
                         DType::kBf16, s.param.data(), DType::kBf16, 10)
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(adam->Update(p, {}, nullptr, nullptr, nullptr, nullptr,
                         DType::kBf16, nullptr, DType::kBf16, -1)
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(adam->Update(p, {}, nullptr, nullptr, nullptr, nullptr,
                           DType::kBf16, nullptr, DType::kBf16, 0)
                  .ok());
}

TEST(CpuAdamTest, CreateChecksOptionsAndPath) {
  CpuAdamOptions options;
  options.num_threads = -1;
  EXPECT_FALSE(CpuAdam::Create(options).ok());
  options.num_threads = 0;
  options.min_elements_per_thread = 0;
  EXPECT_FALSE(CpuAdam::Create(options).ok());
  options.min_elements_per_thread = 1;
  options.chunk_elements = 0;
  EXPECT_FALSE(CpuAdam::Create(options).ok());
  options.chunk_elements = 1;
  auto adam = CpuAdam::Create(options);
  ASSERT_TRUE(adam.ok());
  EXPECT_GE((*adam)->num_threads(), 1);
  EXPECT_NE((*adam)->path(), CpuAdamPath::kAuto);
  for (CpuAdamPath p : {CpuAdamPath::kAvx2, CpuAdamPath::kAvx512}) {
    options.path = p;
    EXPECT_EQ(CpuAdam::Create(options).ok(), CpuAdamPathSupported(p));
  }
}

}  // namespace
}  // namespace zshard::optim
