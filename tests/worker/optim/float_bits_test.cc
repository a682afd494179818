// Tests of the fp32 <-> bf16 / fp16 conversions against the long-double
// rounding reference: round to nearest even, ties, subnormals, overflow,
// infinities and NaN.
#include "client/worker/optim/float_bits.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "gtest/gtest.h"
#include "tests/worker/optim/adam_reference.h"

namespace zshard::optim {
namespace {

using testing::FloatFromBf16;
using testing::FloatFromFp16;
using testing::RefRoundBf16;
using testing::RefRoundFp16;

float FromBits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof(f));
  return f;
}

uint16_t Bf16(float x) { return static_cast<uint16_t>(FloatToBf16Bits(x)); }
uint16_t Fp16(float x) { return static_cast<uint16_t>(FloatToHalfBits(x)); }

TEST(FloatBitsTest, Bf16MatchesReferenceOnRandomBitPatterns) {
  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i) {
    const float x = FromBits(static_cast<uint32_t>(rng()));
    if (std::isnan(x)) continue;
    const long double want = RefRoundBf16(x);
    const float got = FloatFromBf16(Bf16(x));
    ASSERT_EQ((long double)got, want) << "x=" << x;
    ASSERT_EQ(std::signbit(got), std::signbit(x)) << "x=" << x;
  }
}

TEST(FloatBitsTest, Bf16TiesRoundToEven) {
  EXPECT_EQ(Bf16(FromBits(0x3F808000u)), 0x3F80);  // tie, even below
  EXPECT_EQ(Bf16(FromBits(0x3F818000u)), 0x3F82);  // tie, even above
  EXPECT_EQ(Bf16(FromBits(0x3F808001u)), 0x3F81);  // just above the tie
  EXPECT_EQ(Bf16(FromBits(0x3F807FFFu)), 0x3F80);  // just below the tie
}

TEST(FloatBitsTest, Bf16SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(Bf16(inf), 0x7F80);
  EXPECT_EQ(Bf16(-inf), 0xFF80);
  EXPECT_EQ(Bf16(std::numeric_limits<float>::max()), 0x7F80);  // overflow
  EXPECT_EQ(Bf16(0.0f), 0x0000);
  EXPECT_EQ(Bf16(-0.0f), 0x8000);
  EXPECT_EQ(Bf16(FromBits(0x00000001u)), 0x0000);  // tiny subnormal
  // NaNs stay NaN, including ones whose payload sits in the dropped bits.
  for (uint32_t nan : {0x7FC00000u, 0x7F800001u, 0xFF800001u, 0x7FFFFFFFu}) {
    const uint16_t h = Bf16(FromBits(nan));
    EXPECT_TRUE(std::isnan(FloatFromBf16(h))) << std::hex << nan;
    EXPECT_EQ(h >> 15, nan >> 31) << std::hex << nan;
  }
}

TEST(FloatBitsTest, Bf16RoundTripsEveryPattern) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float x = Bf16BitsToFloat<float>(h);
    const float want = FloatFromBf16(static_cast<uint16_t>(h));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(x)) << h;
      continue;
    }
    ASSERT_EQ(x, want) << h;
    ASSERT_EQ(Bf16(x), h);
  }
}

TEST(FloatBitsTest, Fp16MatchesReferenceOnRandomValues) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  std::uniform_int_distribution<int> exp(-28, 17);
  for (int i = 0; i < 200000; ++i) {
    float x = std::ldexp(mant(rng), exp(rng));
    if (rng() & 1) x = -x;
    const long double want = RefRoundFp16(x);
    const long double got = FloatFromFp16(Fp16(x));
    ASSERT_EQ(got, want) << "x=" << x;
  }
}

TEST(FloatBitsTest, Fp16RoundTripsEveryPattern) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float x = HalfBitsToFloat(h);
    const long double want = FloatFromFp16(static_cast<uint16_t>(h));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(x)) << h;
      ASSERT_TRUE(std::isnan(FloatFromFp16(Fp16(x)))) << h;
      continue;
    }
    ASSERT_EQ((long double)x, want) << h;
    ASSERT_EQ(Fp16(x), h);
  }
}

TEST(FloatBitsTest, Fp16OverflowAndTies) {
  EXPECT_EQ(Fp16(65504.0f), 0x7BFF);
  EXPECT_EQ(Fp16(65519.0f), 0x7BFF);  // below the midpoint to 2^16
  EXPECT_EQ(Fp16(65520.0f), 0x7C00);  // midpoint: rounds to even = inf
  EXPECT_EQ(Fp16(-1e9f), 0xFC00);
  EXPECT_EQ(Fp16(std::ldexp(1.0f, -25)), 0x0000);  // tie with 0: even
  EXPECT_EQ(Fp16(std::ldexp(1.5f, -25)), 0x0001);  // above the tie
  EXPECT_EQ(Fp16(std::ldexp(3.0f, -25)), 0x0002);  // tie 1|2: even
}

uint32_t Bits(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof(b));
  return b;
}

// A GPU's multiply turns every NaN into one canonical NaN; the scale the
// host and the device share keeps the NaN's sign and payload, quieted, as
// x86 does, and rounds every other value as a plain product.
TEST(FloatBitsTest, ScaleKeepsTheNanAndRoundsTheRest) {
  EXPECT_EQ(Bits(ScaleKeepingNan(FromBits(0x7FC00000u), 0.125f)), 0x7FC00000u);
  EXPECT_EQ(Bits(ScaleKeepingNan(FromBits(0xFFC12345u), 0.125f)), 0xFFC12345u);
  // A signalling NaN comes back quiet, payload kept.
  EXPECT_EQ(Bits(ScaleKeepingNan(FromBits(0x7F800001u), 0.5f)), 0x7FC00001u);
  EXPECT_EQ(ScaleKeepingNan(std::numeric_limits<float>::infinity(), 0.125f),
            std::numeric_limits<float>::infinity());
  std::mt19937 rng(3);
  for (int i = 0; i < 100000; ++i) {
    const float x = FromBits(static_cast<uint32_t>(rng()));
    if (std::isnan(x)) continue;
    const volatile float product = x * 0.1f;
    EXPECT_EQ(Bits(ScaleKeepingNan(x, 0.1f)), Bits(product)) << x;
  }
}

}  // namespace
}  // namespace zshard::optim
