// Tests of the bf16/fp16 conversions and the reduction kernel.
#include "client/worker/comm/numerics.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace zshard::comm {
namespace {

float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

TEST(NumericsTest, Bf16RoundTripsEveryPattern) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const float f = Bf16ToFloat(static_cast<uint16_t>(b));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(f))));
      continue;
    }
    ASSERT_EQ(FloatToBf16(f), b) << "pattern " << b;
  }
}

TEST(NumericsTest, Bf16RoundsToNearestEven) {
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties go to the even 1.
  EXPECT_EQ(FloatToBf16(1.0f + 0x1p-8f), FloatToBf16(1.0f));
  // Just above halfway rounds up.
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(FromBits(0x3f808001u))), 1.0f + 0x1p-7f);
  // 1 + 3*2^-8 is halfway between odd 1+2^-7 and even 1+2^-6: goes up.
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(1.0f + 3 * 0x1p-8f)), 1.0f + 0x1p-6f);
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(std::nanf("")))));
  EXPECT_TRUE(std::isinf(Bf16ToFloat(FloatToBf16(3.4e38f))));
}

TEST(NumericsTest, Fp16RoundTripsEveryPattern) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const float f = Fp16ToFloat(static_cast<uint16_t>(b));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(Fp16ToFloat(FloatToFp16(f))));
      continue;
    }
    ASSERT_EQ(FloatToFp16(f), b) << "pattern " << b;
  }
}

TEST(NumericsTest, Fp16RoundsOverflowsAndSubnormals) {
  EXPECT_EQ(Fp16ToFloat(FloatToFp16(65504.0f)), 65504.0f);
  EXPECT_TRUE(std::isinf(Fp16ToFloat(FloatToFp16(65520.0f))));
  EXPECT_EQ(Fp16ToFloat(FloatToFp16(65519.0f)), 65504.0f);
  EXPECT_EQ(Fp16ToFloat(FloatToFp16(0x1p-24f)), 0x1p-24f);
  EXPECT_EQ(FloatToFp16(0x1p-25f), 0);  // tie to even zero
  EXPECT_EQ(Fp16ToFloat(FloatToFp16(3 * 0x1p-25f)), 0x1p-23f);
  EXPECT_EQ(FloatToFp16(-0.0f), 0x8000);
  EXPECT_EQ(Fp16ToFloat(FloatToFp16(1.0f + 0x1p-11f)), 1.0f);
}

TEST(NumericsTest, Bf16SumAccumulatesInFp32AndRoundsOnce) {
  // 256 + 1 + 1: per-step bf16 rounding loses both ones (256+1 ties to 256);
  // one rounding of the fp32 sum 258 keeps them.
  const uint16_t a = FloatToBf16(256.0f);
  const uint16_t b = FloatToBf16(1.0f);
  const void* inputs[] = {&a, &b, &b};
  uint16_t out = 0;
  ReduceInto(DataType::kBf16, ReduceOp::kSum, inputs, 3, &out, 1);
  EXPECT_EQ(Bf16ToFloat(out), 258.0f);
}

TEST(NumericsTest, Int64ReducesExactlyBeyondFloatPrecision) {
  const int64_t big = (int64_t{1} << 60) + 1;
  std::vector<int64_t> x(3000, big), y(3000, 1), out(3000);
  const void* inputs[] = {x.data(), y.data()};
  ReduceInto(DataType::kInt64, ReduceOp::kSum, inputs, 2, out.data(), 3000);
  EXPECT_EQ(out[2999], big + 1);
  ReduceInto(DataType::kInt64, ReduceOp::kMax, inputs, 2, out.data(), 3000);
  EXPECT_EQ(out[0], big);
}

TEST(NumericsTest, MaxAndInPlaceOutput) {
  std::vector<float> a = {1, -5, 3}, b = {2, -7, std::nextafter(3.0f, 4.0f)};
  const void* inputs[] = {a.data(), b.data()};
  ReduceInto(DataType::kFp32, ReduceOp::kMax, inputs, 2, a.data(), 3);
  EXPECT_EQ(a[0], 2);
  EXPECT_EQ(a[1], -5);
  EXPECT_EQ(a[2], std::nextafter(3.0f, 4.0f));
  std::vector<uint8_t> u = {250, 3}, v = {10, 4};
  const void* bytes[] = {u.data(), v.data()};
  ReduceInto(DataType::kUint8, ReduceOp::kSum, bytes, 2, u.data(), 2);
  EXPECT_EQ(u[0], 4);  // wraps
  EXPECT_EQ(u[1], 7);
}

}  // namespace
}  // namespace zshard::comm
