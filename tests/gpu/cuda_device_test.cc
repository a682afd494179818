// The CUDA device against the host device: the kernels (cast, sum of
// squares, scale) give the same bits on random slices of odd sizes at
// unaligned starts; copies of more than the staging buffers hold come back
// intact; the ledger counts device bytes exactly. Skipped without a CUDA
// device.
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "client/worker/cuda/cuda_util.h"
#include "client/worker/device/device.h"
#include "client/worker/device/host_device.h"
#include "gtest/gtest.h"

namespace zshard::device {
namespace {

using plan::DType;

int Bytes(DType d) { return d == DType::kFp32 ? 4 : 2; }

class CudaDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no cuda device";
    absl::StatusOr<std::unique_ptr<Device>> dev =
        OpenDevice({DeviceKind::kCuda, 0});
    ASSERT_TRUE(dev.ok()) << dev.status();
    gpu_ = *std::move(dev);
    host_ = OpenHostDevice();
  }

  // `bytes` of device memory holding `host`.
  Buffer Upload(const void* host, int64_t bytes) {
    absl::StatusOr<Buffer> b = gpu_->Allocate(MemoryCategory::kComm, bytes);
    EXPECT_TRUE(b.ok()) << b.status();
    EXPECT_TRUE(gpu_->CopyToDevice(b->data(), host, bytes).ok());
    return *std::move(b);
  }
  std::vector<uint8_t> Download(const Buffer& b) {
    std::vector<uint8_t> out(b.size());
    EXPECT_TRUE(gpu_->CopyToHost(out.data(), b.data(), b.size()).ok());
    return out;
  }

  std::unique_ptr<Device> gpu_;
  std::unique_ptr<Device> host_;
};

// Random bits of a slice: small normal values (bf16: truncated; fp16:
// random bit patterns of moderate exponent), with an infinity and a NaN
// when `specials` (bf16 and fp32).
std::vector<uint8_t> RandomSlice(DType d, int64_t n, std::mt19937& rng,
                                 bool specials) {
  std::normal_distribution<float> normal(0.0f, 1e-2f);
  std::vector<uint8_t> out(n * Bytes(d));
  std::vector<float> f(n);
  for (float& x : f) x = normal(rng);
  if (specials && n > 10) {
    f[n / 3] = std::numeric_limits<float>::infinity();
    f[n / 2] = std::numeric_limits<float>::quiet_NaN();
  }
  for (int64_t i = 0; i < n; ++i) {
    if (d == DType::kFp32) {
      std::memcpy(out.data() + 4 * i, &f[i], 4);
    } else {
      // Truncation is enough for random test data.
      uint32_t bits;
      std::memcpy(&bits, &f[i], 4);
      const uint16_t h = static_cast<uint16_t>(
          d == DType::kBf16 ? bits >> 16 : (bits >> 16) & 0x3FFF);
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
  }
  return out;
}

std::vector<optim::Segment> RandomSegments(int64_t n, std::mt19937& rng) {
  std::vector<optim::Segment> segs;
  std::uniform_int_distribution<int64_t> len(1, 5000);
  std::uniform_int_distribution<int> coin(0, 5);
  int64_t at = 0;
  while (at < n) {
    const int64_t e = std::min(n, at + len(rng));
    segs.push_back({at, e, coin(rng) == 0, coin(rng) == 1});
    at = e + (coin(rng) == 2 ? 3 : 0);  // sometimes a gap
  }
  return segs;
}

TEST_F(CudaDeviceTest, KernelsMatchTheHostDeviceBitForBit) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int64_t> size(1, 300000);
  std::uniform_int_distribution<int64_t> skew(1, 63);
  for (int round = 0; round < 12; ++round) {
    const int64_t n = size(rng) | 1;  // odd
    const int64_t off = skew(rng);    // unaligned start, in elements
    const std::vector<optim::Segment> segs = RandomSegments(n, rng);
    for (DType d : {DType::kBf16, DType::kFp16, DType::kFp32}) {
      const int64_t eb = Bytes(d);
      // Sum of squares.
      std::vector<uint8_t> grad = RandomSlice(d, n + off, rng, round % 3 == 0);
      Buffer dgrad = Upload(grad.data(), grad.size());
      std::vector<GradStats> want(segs.size()), got(segs.size());
      ASSERT_TRUE(host_
                      ->SumSquares(grad.data() + off * eb, d, segs, n,
                                   absl::MakeSpan(want))
                      .ok());
      ASSERT_TRUE(
          gpu_->SumSquares(dgrad.at(off * eb), d, segs, n, absl::MakeSpan(got))
              .ok());
      for (size_t k = 0; k < segs.size(); ++k) {
        ASSERT_EQ(std::memcmp(&got[k].sum_squares, &want[k].sum_squares, 8), 0)
            << "round " << round << " " << DTypeName(d) << " segment " << k;
        ASSERT_EQ(got[k].nonfinite, want[k].nonfinite);
      }
      // Cast.
      std::vector<float> master(n + off);
      std::normal_distribution<float> normal(0.0f, 1.0f);
      for (float& x : master) x = normal(rng);
      Buffer dmaster = Upload(master.data(), master.size() * 4);
      std::vector<uint8_t> param((n + off) * eb, 0x3C);
      Buffer dparam = Upload(param.data(), param.size());
      ASSERT_TRUE(host_
                      ->CastToParam(master.data() + off,
                                    param.data() + off * eb, d, segs, n)
                      .ok());
      ASSERT_TRUE(gpu_->CastToParam(static_cast<float*>(dmaster.data()) + off,
                                    dparam.at(off * eb), d, segs, n)
                      .ok());
      ASSERT_EQ(Download(dparam), param) << DTypeName(d);
      // Scale.
      ASSERT_TRUE(host_->Scale(grad.data() + off * eb, d, n, 0.125f).ok());
      ASSERT_TRUE(gpu_->Scale(dgrad.at(off * eb), d, n, 0.125f).ok());
      ASSERT_EQ(Download(dgrad), grad) << DTypeName(d);
    }
  }
}

TEST_F(CudaDeviceTest, CopiesLargerThanStagingComeBackIntact) {
  const int64_t n = (int64_t{9} << 20) + 3;  // more than two 4 MiB chunks
  std::vector<uint8_t> in(n);
  for (int64_t i = 0; i < n; ++i) in[i] = static_cast<uint8_t>(i * 131 + 7);
  absl::StatusOr<Buffer> a = gpu_->Allocate(MemoryCategory::kParam, n);
  absl::StatusOr<Buffer> b = gpu_->Allocate(MemoryCategory::kGrad, n);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(gpu_->CopyToDevice(a->data(), in.data(), n).ok());
  ASSERT_TRUE(gpu_->CopyOnDevice(b->data(), a->data(), n).ok());
  ASSERT_TRUE(gpu_->Zero(b->at(1000), 5000).ok());
  std::vector<uint8_t> out(n);
  ASSERT_TRUE(gpu_->CopyToHost(out.data(), b->data(), n).ok());
  std::vector<uint8_t> want = in;
  std::fill(want.begin() + 1000, want.begin() + 6000, 0);
  EXPECT_EQ(out, want);
}

TEST_F(CudaDeviceTest, LedgerCountsDeviceBytesPerCategory) {
  const MemoryBytes before = gpu_->memory();
  {
    absl::StatusOr<Buffer> p = gpu_->Allocate(MemoryCategory::kParam, 1001);
    absl::StatusOr<Buffer> m = gpu_->Allocate(MemoryCategory::kMaster, 4004);
    absl::StatusOr<Buffer> s = gpu_->Allocate(MemoryCategory::kStaging, 333);
    ASSERT_TRUE(p.ok() && m.ok() && s.ok());
    const MemoryBytes now = gpu_->memory();
    EXPECT_EQ(now.param - before.param, 1001);
    EXPECT_EQ(now.master - before.master, 4004);
    EXPECT_EQ(now.staging - before.staging, 333);
    EXPECT_EQ(now.total() - before.total(), 1001 + 4004);
  }
  EXPECT_EQ(gpu_->memory().total(), before.total());
  absl::StatusOr<std::unique_ptr<optim::Optimizer>> adam =
      gpu_->CreateAdam(AdamOptions{});
  ASSERT_TRUE(adam.ok()) << adam.status();
  EXPECT_EQ((*adam)->name(), "cuda adam");
}

}  // namespace
}  // namespace zshard::device
