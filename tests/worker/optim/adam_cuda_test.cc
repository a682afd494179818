// Tests of the CUDA AdamW kernel against the CPU kernel (bit-identical: both
// call the one formula with IEEE division and sqrt and no fused
// multiply-adds), on one large slice and on random slices of odd sizes at
// unaligned starts, for every grad and param dtype. Skipped when no CUDA
// device is present.
#include "client/worker/optim/adam_cuda.h"

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "client/worker/cuda/cuda_util.h"
#include "client/worker/optim/cpu_adam.h"
#include "client/worker/optim/float_bits.h"
#include "gtest/gtest.h"

namespace zshard::optim {
namespace {

using plan::DType;

int Bytes(DType d) { return d == DType::kFp32 ? 4 : 2; }

struct HostSlice {
  std::vector<float> master, m, v;
  std::vector<uint8_t> grad, param;
};

HostSlice MakeSlice(int64_t n, DType gd, DType pd, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  HostSlice s;
  s.grad.resize(n * Bytes(gd));
  s.param.assign(n * Bytes(pd), 0x5A);
  for (int64_t i = 0; i < n; ++i) {
    s.master.push_back(0.05f * normal(rng));
    s.m.push_back(1e-3f * normal(rng));
    const float r = 1e-3f * normal(rng);
    s.v.push_back(r * r);
    const float g = 1e-2f * normal(rng);
    if (gd == DType::kFp32) {
      std::memcpy(s.grad.data() + 4 * i, &g, 4);
    } else {
      const uint16_t h = static_cast<uint16_t>(
          gd == DType::kBf16 ? FloatToBf16Bits(g) : FloatToHalfBits(g));
      std::memcpy(s.grad.data() + 2 * i, &h, 2);
    }
  }
  return s;
}

class CudaAdamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no cuda device";
  }
};

TEST_F(CudaAdamTest, MatchesCpuKernelBitForBit) {
  const int64_t n = (1 << 20) + 37;
  std::vector<Segment> segs;
  for (int64_t b = 0; b + 5000 <= n; b += 5000) {
    // 300 pieces (more than one launch's worth), some padding, some without
    // weight decay, some gaps.
    segs.push_back({b, b + 4000, (b / 5000) % 3 == 0, (b / 5000) % 7 == 0});
  }
  AdamHyper hyper;
  hyper.weight_decay = 0.1;
  auto params = MakeAdamStepParams(hyper, 5, 1.0 / 64);
  ASSERT_TRUE(params.ok());
  auto cpu = CpuAdam::Create(CpuAdamOptions{});
  ASSERT_TRUE(cpu.ok());
  auto gpu = CudaAdam::Create(CudaAdamOptions{});
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  for (DType gd : {DType::kBf16, DType::kFp16, DType::kFp32}) {
    for (DType pd : {DType::kBf16, DType::kFp16, DType::kFp32}) {
      HostSlice want = MakeSlice(n, gd, pd, 17);
      HostSlice got = want;
      ASSERT_TRUE((*cpu)
                      ->Update(*params, segs, want.master.data(), want.m.data(),
                               want.v.data(), want.grad.data(), gd,
                               want.param.data(), pd, n)
                      .ok());
      auto d_master = DeviceBuffer::Allocate(4 * n);
      auto d_m = DeviceBuffer::Allocate(4 * n);
      auto d_v = DeviceBuffer::Allocate(4 * n);
      auto d_grad = DeviceBuffer::Allocate(got.grad.size());
      auto d_param = DeviceBuffer::Allocate(got.param.size());
      ASSERT_TRUE(d_master.ok() && d_m.ok() && d_v.ok() && d_grad.ok() &&
                  d_param.ok());
      ASSERT_TRUE(d_master->CopyFromHost(got.master.data(), 4 * n).ok());
      ASSERT_TRUE(d_m->CopyFromHost(got.m.data(), 4 * n).ok());
      ASSERT_TRUE(d_v->CopyFromHost(got.v.data(), 4 * n).ok());
      ASSERT_TRUE(d_grad->CopyFromHost(got.grad.data(), got.grad.size()).ok());
      ASSERT_TRUE(
          d_param->CopyFromHost(got.param.data(), got.param.size()).ok());
      ASSERT_TRUE((*gpu)
                      ->Update(*params, segs,
                               static_cast<float*>(d_master->data()),
                               static_cast<float*>(d_m->data()),
                               static_cast<float*>(d_v->data()), d_grad->data(),
                               gd, d_param->data(), pd, n)
                      .ok());
      ASSERT_TRUE((*gpu)->Synchronize().ok());
      ASSERT_TRUE(d_master->CopyToHost(got.master.data(), 4 * n).ok());
      ASSERT_TRUE(d_m->CopyToHost(got.m.data(), 4 * n).ok());
      ASSERT_TRUE(d_v->CopyToHost(got.v.data(), 4 * n).ok());
      ASSERT_TRUE(d_param->CopyToHost(got.param.data(), got.param.size()).ok());
      EXPECT_EQ(std::memcmp(got.master.data(), want.master.data(), 4 * n), 0);
      EXPECT_EQ(std::memcmp(got.m.data(), want.m.data(), 4 * n), 0);
      EXPECT_EQ(std::memcmp(got.v.data(), want.v.data(), 4 * n), 0);
      EXPECT_EQ(got.param, want.param);
    }
  }
}

// Random slices: odd sizes, starts that are no multiple of anything (the
// slice begins `skew` elements into its buffers), random segment tables
// with gaps, padding and pieces without weight decay.
TEST_F(CudaAdamTest, MatchesCpuKernelOnRandomUnalignedSlices) {
  auto cpu = CpuAdam::Create(CpuAdamOptions{});
  ASSERT_TRUE(cpu.ok());
  auto gpu = CudaAdam::Create(CudaAdamOptions{});
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  std::mt19937 rng(23);
  std::uniform_int_distribution<int64_t> size(1, 200000);
  std::uniform_int_distribution<int64_t> skew_of(1, 31);
  std::uniform_int_distribution<int64_t> piece(1, 7000);
  std::uniform_int_distribution<int> coin(0, 5);
  AdamHyper hyper;
  hyper.weight_decay = 0.05;
  for (int round = 0; round < 10; ++round) {
    const int64_t n = size(rng) | 1;
    const int64_t skew = skew_of(rng);
    std::vector<Segment> segs;
    for (int64_t at = 0; at < n;) {
      const int64_t e = std::min(n, at + piece(rng));
      segs.push_back({at, e, coin(rng) == 0, coin(rng) == 1});
      at = e + (coin(rng) == 2 ? 5 : 0);
    }
    auto params = MakeAdamStepParams(hyper, 1 + round, 1.0 / (round + 3));
    ASSERT_TRUE(params.ok());
    for (DType gd : {DType::kBf16, DType::kFp16, DType::kFp32}) {
      for (DType pd : {DType::kBf16, DType::kFp16, DType::kFp32}) {
        const int64_t total = n + skew;
        HostSlice want = MakeSlice(total, gd, pd, 100 + round);
        HostSlice got = want;
        ASSERT_TRUE((*cpu)
                        ->Update(*params, segs, want.master.data() + skew,
                                 want.m.data() + skew, want.v.data() + skew,
                                 want.grad.data() + skew * Bytes(gd), gd,
                                 want.param.data() + skew * Bytes(pd), pd, n)
                        .ok());
        auto d_master = DeviceBuffer::Allocate(4 * total);
        auto d_m = DeviceBuffer::Allocate(4 * total);
        auto d_v = DeviceBuffer::Allocate(4 * total);
        auto d_grad = DeviceBuffer::Allocate(got.grad.size());
        auto d_param = DeviceBuffer::Allocate(got.param.size());
        ASSERT_TRUE(d_master.ok() && d_m.ok() && d_v.ok() && d_grad.ok() &&
                    d_param.ok());
        ASSERT_TRUE(d_master->CopyFromHost(got.master.data(), 4 * total).ok());
        ASSERT_TRUE(d_m->CopyFromHost(got.m.data(), 4 * total).ok());
        ASSERT_TRUE(d_v->CopyFromHost(got.v.data(), 4 * total).ok());
        ASSERT_TRUE(
            d_grad->CopyFromHost(got.grad.data(), got.grad.size()).ok());
        ASSERT_TRUE(
            d_param->CopyFromHost(got.param.data(), got.param.size()).ok());
        ASSERT_TRUE(
            (*gpu)
                ->Update(
                    *params, segs, static_cast<float*>(d_master->data()) + skew,
                    static_cast<float*>(d_m->data()) + skew,
                    static_cast<float*>(d_v->data()) + skew,
                    static_cast<char*>(d_grad->data()) + skew * Bytes(gd), gd,
                    static_cast<char*>(d_param->data()) + skew * Bytes(pd), pd,
                    n)
                .ok());
        ASSERT_TRUE((*gpu)->Synchronize().ok());
        ASSERT_TRUE(d_master->CopyToHost(got.master.data(), 4 * total).ok());
        ASSERT_TRUE(d_m->CopyToHost(got.m.data(), 4 * total).ok());
        ASSERT_TRUE(d_v->CopyToHost(got.v.data(), 4 * total).ok());
        ASSERT_TRUE(
            d_param->CopyToHost(got.param.data(), got.param.size()).ok());
        EXPECT_EQ(std::memcmp(got.master.data(), want.master.data(), 4 * total),
                  0)
            << "round " << round;
        EXPECT_EQ(std::memcmp(got.m.data(), want.m.data(), 4 * total), 0)
            << "round " << round;
        EXPECT_EQ(std::memcmp(got.v.data(), want.v.data(), 4 * total), 0)
            << "round " << round;
        EXPECT_EQ(got.param, want.param) << "round " << round;
      }
    }
  }
}

TEST_F(CudaAdamTest, RejectsBadArguments) {
  auto gpu = CudaAdam::Create(CudaAdamOptions{});
  ASSERT_TRUE(gpu.ok());
  AdamStepParams p;
  const Segment outside[] = {{0, 11, false, false}};
  EXPECT_EQ((*gpu)
                ->Update(p, outside, nullptr, nullptr, nullptr, nullptr,
                         DType::kBf16, nullptr, DType::kBf16, 10)
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CudaAdamNoDeviceTest, CreateFailsCleanlyWithoutDevice) {
  if (cuda::DeviceCount() > 0) GTEST_SKIP() << "a cuda device is present";
  auto gpu = CudaAdam::Create(CudaAdamOptions{});
  EXPECT_EQ(gpu.status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace zshard::optim
