// The host device: the ledger counts every category's bytes exactly and
// gives them back when buffers go; copies and zeroing move the bytes; the
// kernels equal scalar references written here from their definitions in
// device.h (cast: round to nearest even as Adam rounds; sum of squares: the
// 1024-element fp32 partials added in double; scale), and bad arguments are
// refused.
#include "client/worker/device/host_device.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "client/worker/comm/numerics.h"
#include "client/worker/device/device.h"
#include "client/worker/optim/cpu_adam.h"
#include "client/worker/optim/float_bits.h"
#include "gtest/gtest.h"

namespace zshard::device {
namespace {

using plan::DType;

int Bytes(DType d) { return d == DType::kFp32 ? 4 : 2; }

// Element i of `data` as fp32, with the communicator's conversions (an
// implementation independent of the device's).
float Load(DType d, const void* data, int64_t i) {
  if (d == DType::kFp32) return static_cast<const float*>(data)[i];
  const uint16_t bits = static_cast<const uint16_t*>(data)[i];
  return d == DType::kBf16 ? comm::Bf16ToFloat(bits) : comm::Fp16ToFloat(bits);
}

void Store(DType d, void* data, int64_t i, float x) {
  if (d == DType::kFp32) {
    static_cast<float*>(data)[i] = x;
  } else {
    static_cast<uint16_t*>(data)[i] =
        d == DType::kBf16 ? comm::FloatToBf16(x) : comm::FloatToFp16(x);
  }
}

// Random values of `d` (about 1e-2), with the elements in `bad` replaced by
// inf, -inf or NaN in turn.
std::vector<uint8_t> RandomValues(DType d, int64_t n, uint32_t seed,
                                  const std::vector<int64_t>& bad = {}) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1e-2f);
  std::vector<uint8_t> out(n * Bytes(d));
  for (int64_t i = 0; i < n; ++i) Store(d, out.data(), i, normal(rng));
  const float specials[] = {std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN()};
  for (size_t k = 0; k < bad.size(); ++k) {
    Store(d, out.data(), bad[k], specials[k % 3]);
  }
  return out;
}

// The sum of squares of [begin, end) by device.h's definition.
GradStats ReferenceSumSquares(DType d, const void* data, int64_t begin,
                              int64_t end) {
  GradStats out;
  for (int64_t block = begin; block < end; block += 1024) {
    const int64_t stop = std::min(end, block + 1024);
    float partial = 0;
    for (int64_t j = block; j < stop; ++j) {
      const float g = Load(d, data, j);
      const float square = g * g;
      partial = partial + square;
    }
    if (std::isfinite(partial)) {
      out.sum_squares = out.sum_squares + static_cast<double>(partial);
      continue;
    }
    for (int64_t j = block; j < stop; ++j) {
      const float g = Load(d, data, j);
      if (std::isfinite(g)) {
        out.sum_squares += static_cast<double>(g) * static_cast<double>(g);
      } else {
        ++out.nonfinite;
      }
    }
  }
  return out;
}

TEST(HostDeviceTest, LedgerCountsEveryCategoryExactly) {
  std::unique_ptr<Device> dev = OpenHostDevice();
  EXPECT_EQ(dev->spec(), DeviceSpec{});
  const MemoryCategory all[] = {
      MemoryCategory::kParam,    MemoryCategory::kGrad,
      MemoryCategory::kMaster,   MemoryCategory::kExpAvg,
      MemoryCategory::kExpAvgSq, MemoryCategory::kComm,
      MemoryCategory::kStaging};
  std::vector<Buffer> held;
  int64_t sizes[7];
  for (int c = 0; c < 7; ++c) {
    sizes[c] = 1000 * (c + 1) + 3 * c + 1;  // odd sizes: no rounding up
    absl::StatusOr<Buffer> b = dev->Allocate(all[c], sizes[c]);
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(b->size(), sizes[c]);
    EXPECT_EQ(b->category(), all[c]);
    // Zeroed.
    std::vector<uint8_t> host(sizes[c], 0xAB);
    ASSERT_TRUE(dev->CopyToHost(host.data(), b->data(), sizes[c]).ok());
    EXPECT_EQ(host, std::vector<uint8_t>(sizes[c], 0));
    held.push_back(*std::move(b));
  }
  // A second param buffer adds to its category only.
  absl::StatusOr<Buffer> extra = dev->Allocate(MemoryCategory::kParam, 77);
  ASSERT_TRUE(extra.ok());
  MemoryBytes m = dev->memory();
  EXPECT_EQ(m.param, sizes[0] + 77);
  EXPECT_EQ(m.grad, sizes[1]);
  EXPECT_EQ(m.master, sizes[2]);
  EXPECT_EQ(m.exp_avg, sizes[3]);
  EXPECT_EQ(m.exp_avg_sq, sizes[4]);
  EXPECT_EQ(m.comm, sizes[5]);
  EXPECT_EQ(m.staging, sizes[6]);
  EXPECT_EQ(m.total(),
            m.param + m.grad + m.master + m.exp_avg + m.exp_avg_sq + m.comm);
  // Moving a buffer keeps one entry; freeing takes it off the ledger.
  Buffer moved = std::move(*extra);
  EXPECT_EQ(dev->memory().param, sizes[0] + 77);
  moved = Buffer();
  EXPECT_EQ(dev->memory().param, sizes[0]);
  held.clear();
  m = dev->memory();
  EXPECT_EQ(m.total() + m.staging, 0);
  // Zero bytes: an empty buffer, nothing counted; negative: refused.
  absl::StatusOr<Buffer> empty = dev->Allocate(MemoryCategory::kGrad, 0);
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
  EXPECT_EQ(dev->memory().grad, 0);
  EXPECT_EQ(dev->Allocate(MemoryCategory::kGrad, -1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(HostDeviceTest, TooLargeAnAllocationIsResourceExhausted) {
  std::unique_ptr<Device> dev = OpenHostDevice();
  absl::StatusOr<Buffer> b =
      dev->Allocate(MemoryCategory::kParam, int64_t{1} << 62);
  EXPECT_EQ(b.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(dev->memory().param, 0);
  EXPECT_GT(dev->capacity_bytes(), 0);
}

TEST(HostDeviceTest, CopiesAndZeroMoveTheBytes) {
  std::unique_ptr<Device> dev = OpenHostDevice();
  const int64_t n = 10007;
  absl::StatusOr<Buffer> a = dev->Allocate(MemoryCategory::kComm, n);
  absl::StatusOr<Buffer> b = dev->Allocate(MemoryCategory::kComm, n);
  ASSERT_TRUE(a.ok() && b.ok());
  std::vector<uint8_t> in(n);
  for (int64_t i = 0; i < n; ++i) in[i] = static_cast<uint8_t>(i * 7 + 1);
  ASSERT_TRUE(dev->CopyToDevice(a->data(), in.data(), n).ok());
  ASSERT_TRUE(dev->CopyOnDevice(b->at(5), a->data(), n - 5).ok());
  std::vector<uint8_t> out(n);
  ASSERT_TRUE(dev->CopyToHost(out.data(), b->data(), n).ok());
  for (int64_t i = 0; i < 5; ++i) EXPECT_EQ(out[i], 0);
  for (int64_t i = 5; i < n; ++i) ASSERT_EQ(out[i], in[i - 5]) << i;
  ASSERT_TRUE(dev->Zero(b->at(100), 200).ok());
  ASSERT_TRUE(dev->CopyToHost(out.data(), b->data(), n).ok());
  for (int64_t i = 100; i < 300; ++i) ASSERT_EQ(out[i], 0) << i;
  EXPECT_EQ(out[99], in[94]);
  EXPECT_EQ(out[300], in[295]);
  EXPECT_TRUE(dev->Synchronize().ok());
}

TEST(HostDeviceTest, CastRoundsEachCoveredElementAsAdamDoes) {
  std::unique_ptr<Device> dev = OpenHostDevice();
  const int64_t n = 3001;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> master(n);
  for (float& x : master) x = normal(rng) * 1e-3f;
  master[10] = 65504.0f * 2;  // past fp16's range: infinity
  master[11] = 1e-7f;         // an fp16 subnormal
  // Two pieces, a gap and a padding segment that must stay untouched.
  const std::vector<optim::Segment> segs = {{0, 1000, false, false},
                                            {1200, 2000, true, false},
                                            {2000, 2500, false, true},
                                            {2600, n, false, false}};
  for (DType d : {DType::kBf16, DType::kFp16, DType::kFp32}) {
    std::vector<uint8_t> param(n * Bytes(d), 0x5A);
    const std::vector<uint8_t> before = param;
    ASSERT_TRUE(dev->CastToParam(master.data(), param.data(), d, segs, n).ok());
    for (int64_t i = 0; i < n; ++i) {
      const bool covered = i < 1000 || (i >= 1200 && i < 2000) || i >= 2600;
      if (!covered) {
        ASSERT_EQ(std::memcmp(param.data() + i * Bytes(d),
                              before.data() + i * Bytes(d), Bytes(d)),
                  0)
            << i;
        continue;
      }
      std::vector<uint8_t> want(4);
      Store(d, want.data(), 0, master[i]);
      ASSERT_EQ(std::memcmp(param.data() + i * Bytes(d), want.data(), Bytes(d)),
                0)
          << DTypeName(d) << " element " << i;
    }
  }
}

TEST(HostDeviceTest, SumSquaresFollowsTheDefinedOrderBitForBit) {
  std::unique_ptr<Device> dev = OpenHostDevice();
  const int64_t n = 9000;
  // Segments of odd lengths and starts, one padding, one of 1024 + 1.
  const std::vector<optim::Segment> segs = {{3, 1030, false, false},
                                            {1030, 1031, false, false},
                                            {1100, 4000, true, false},
                                            {4000, 5000, false, true},
                                            {5001, 8999, false, false}};
  for (DType d : {DType::kBf16, DType::kFp16, DType::kFp32}) {
    for (const bool poisoned : {false, true}) {
      const std::vector<int64_t> bad =
          poisoned ? std::vector<int64_t>{7, 2048, 2049, 6000}
                   : std::vector<int64_t>{};
      const std::vector<uint8_t> grad = RandomValues(d, n, 11, bad);
      std::vector<GradStats> got(segs.size());
      ASSERT_TRUE(
          dev->SumSquares(grad.data(), d, segs, n, absl::MakeSpan(got)).ok());
      int64_t nonfinite = 0;
      for (size_t k = 0; k < segs.size(); ++k) {
        const GradStats want =
            segs[k].padding ? GradStats{}
                            : ReferenceSumSquares(d, grad.data(), segs[k].begin,
                                                  segs[k].end);
        EXPECT_EQ(std::memcmp(&got[k].sum_squares, &want.sum_squares, 8), 0)
            << DTypeName(d) << " segment " << k << ": " << got[k].sum_squares
            << " vs " << want.sum_squares;
        EXPECT_EQ(got[k].nonfinite, want.nonfinite) << "segment " << k;
        nonfinite += got[k].nonfinite;
      }
      EXPECT_EQ(nonfinite, poisoned ? 4 : 0) << DTypeName(d);
      EXPECT_GT(got[0].sum_squares, 0);
    }
  }
}

TEST(HostDeviceTest, ScaleMultipliesAndRoundsBack) {
  std::unique_ptr<Device> dev = OpenHostDevice();
  const int64_t n = 777;
  for (DType d : {DType::kBf16, DType::kFp16, DType::kFp32}) {
    std::vector<uint8_t> data = RandomValues(d, n, 3);
    const std::vector<uint8_t> before = data;
    ASSERT_TRUE(dev->Scale(data.data(), d, n, 0.37f).ok());
    for (int64_t i = 0; i < n; ++i) {
      std::vector<uint8_t> want(4);
      Store(d, want.data(), 0, Load(d, before.data(), i) * 0.37f);
      ASSERT_EQ(std::memcmp(data.data() + i * Bytes(d), want.data(), Bytes(d)),
                0)
          << i;
    }
  }
}

TEST(HostDeviceTest, KernelsRefuseBadArguments) {
  std::unique_ptr<Device> dev = OpenHostDevice();
  float x[4] = {};
  std::vector<GradStats> out(1);
  const std::vector<optim::Segment> outside = {{0, 5, false, false}};
  EXPECT_EQ(dev->CastToParam(x, x, DType::kFp32, outside, 4).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(dev->CastToParam(nullptr, x, DType::kBf16, {}, 4).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      dev->SumSquares(x, DType::kFp32, outside, 4, absl::MakeSpan(out)).code(),
      absl::StatusCode::kInvalidArgument);
  const std::vector<optim::Segment> one = {{0, 4, false, false}};
  std::vector<GradStats> two(2);
  EXPECT_EQ(
      dev->SumSquares(x, DType::kFp32, one, 4, absl::MakeSpan(two)).code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(dev->Scale(nullptr, DType::kFp32, 3, 2.0f).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(dev->Scale(x, DType::kFp32, -1, 2.0f).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(HostDeviceTest, AdamIsTheCpuKernel) {
  std::unique_ptr<Device> dev = OpenHostDevice();
  AdamOptions options;
  options.threads = 2;
  absl::StatusOr<std::unique_ptr<optim::Optimizer>> adam =
      dev->CreateAdam(options);
  ASSERT_TRUE(adam.ok()) << adam.status();
  EXPECT_EQ((*adam)->name(), "cpu adam");
  // The shared argument checks name the kernel.
  const optim::Segment outside[] = {{0, 11, false, false}};
  const absl::Status bad = (*adam)->Update(
      optim::AdamStepParams{}, outside, nullptr, nullptr, nullptr, nullptr,
      DType::kBf16, nullptr, DType::kBf16, 10);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.message().rfind("cpu adam", 0), 0u) << bad;
  EXPECT_TRUE((*adam)->Synchronize().ok());
}

TEST(OpenDeviceTest, CpuIsTheHostDeviceAndCudaNeedsOne) {
  absl::StatusOr<std::unique_ptr<Device>> cpu = OpenDevice(DeviceSpec{});
  ASSERT_TRUE(cpu.ok());
  EXPECT_EQ((*cpu)->spec().kind, DeviceKind::kCpu);
  // No machine has 1024 CUDA devices: refused with CheckDeviceUsable's line.
  absl::StatusOr<std::unique_ptr<Device>> cuda =
      OpenDevice(DeviceSpec{DeviceKind::kCuda, 1023});
  EXPECT_EQ(cuda.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(cuda.status().message(),
            CheckDeviceUsable({DeviceKind::kCuda, 1023}).message());
}

}  // namespace
}  // namespace zshard::device
