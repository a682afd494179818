// The tiled bf16 reduction against the scalar conversions, element by
// element, over arbitrary bit patterns (NaNs, infinities, subnormals, ties).
#include <cmath>
#include <cstdint>
#include <vector>

#include "client/worker/comm/numerics.h"
#include "gtest/gtest.h"

namespace zshard::comm {
namespace {

uint16_t Bits(uint64_t i) {
  uint64_t h = (i + 1) * 0x9e3779b97f4a7c15ull;
  h ^= h >> 31;
  return static_cast<uint16_t>(h >> 17);
}

TEST(ReduceBf16Test, MatchesScalarConversionsBitForBit) {
  const size_t count = 5000;  // not a multiple of the tile
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
    std::vector<std::vector<uint16_t>> in(3, std::vector<uint16_t>(count));
    for (int k = 0; k < 3; ++k) {
      for (size_t i = 0; i < count; ++i) in[k][i] = Bits(k * count + i);
    }
    const void* inputs[3] = {in[0].data(), in[1].data(), in[2].data()};
    std::vector<uint16_t> out(count);
    ReduceInto(DataType::kBf16, op, inputs, 3, out.data(), count);
    size_t bad = 0;
    for (size_t i = 0; i < count; ++i) {
      float acc = Bf16ToFloat(in[0][i]);
      for (int k = 1; k < 3; ++k) {
        const float x = Bf16ToFloat(in[k][i]);
        acc = op == ReduceOp::kSum ? acc + x : std::max(acc, x);
      }
      const uint16_t want = FloatToBf16(acc);
      if (out[i] != want) {
        if (bad == 0) {
          ADD_FAILURE() << "element " << i << " is 0x" << std::hex << out[i]
                        << ", want 0x" << want;
        }
        ++bad;
      }
    }
    EXPECT_EQ(bad, 0u);
  }
}

}  // namespace
}  // namespace zshard::comm
