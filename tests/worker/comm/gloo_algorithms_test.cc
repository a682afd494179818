// Tests of the Gloo reduce-scatter algorithms one by one (ring and pairwise
// exchange) with tiny chunks, so that every chunk buffer is reused many
// times, uneven all-reduce blocks, in-place calls and each exact type, over
// both host transports.
#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/worker/comm/communicator.h"
#include "client/worker/comm/memory_kv_store.h"
#include "gtest/gtest.h"
#include "tests/worker/comm/comm_test_util.h"

namespace zshard::comm {
namespace {

using testing::RunRanks;

// (ring, ranks, depth, host transport)
class GlooAlgorithmTest : public ::testing::TestWithParam<
                              std::tuple<bool, int, int, HostTransport>> {
 protected:
  bool ring() const { return std::get<0>(GetParam()); }
  int ranks() const { return std::get<1>(GetParam()); }

  CommOptions Options(int rank) {
    CommOptions o;
    o.rank = rank;
    o.size = ranks();
    o.group = "algorithms";
    o.store = &store_;
    o.timeout_ms = 20000;
    o.chunk_bytes = 4096;  // the smallest: 1024 fp32 elements per message
    o.pipeline_depth = std::get<2>(GetParam());
    o.gloo_ring = ring();
    o.host_transport = std::get<3>(GetParam());
    return o;
  }

  MemoryKvStore store_;
};

// Rank r's fp32 input j: not integers, so the sum rounds.
float Fp32Input(int r, size_t j) {
  return std::sin(static_cast<float>(r * 131 + j)) * 3.0f;
}

TEST_P(GlooAlgorithmTest, Fp32ReduceScatterAndUnevenAllReduce) {
  const int n = ranks();
  const size_t count = 1000;   // 16 chunks of 64 elements per block
  const size_t uneven = 4003;  // all-reduce blocks differ by one element
  RunRanks(n, [&](int rank) {
    auto comm = CreateCommunicator(Options(rank));
    ASSERT_TRUE(comm.ok()) << comm.status();
    std::vector<float> full(count * n);
    for (size_t j = 0; j < full.size(); ++j) full[j] = Fp32Input(rank, j);
    std::vector<float> part(count);
    ASSERT_TRUE((*comm)
                    ->ReduceScatter(full.data(), part.data(), count,
                                    DataType::kFp32, ReduceOp::kSum)
                    .ok());
    size_t bad = 0;
    for (size_t i = 0; i < count; ++i) {
      double want = 0;
      for (int r = 0; r < n; ++r) want += Fp32Input(r, rank * count + i);
      if (std::fabs(part[i] - want) > 1e-5 * n * 3) ++bad;
    }
    EXPECT_EQ(bad, 0u) << "reduce-scatter rank " << rank;

    std::vector<float> buf(uneven);
    for (size_t j = 0; j < uneven; ++j) buf[j] = Fp32Input(rank, j);
    ASSERT_TRUE(
        (*comm)
            ->AllReduce(buf.data(), uneven, DataType::kFp32, ReduceOp::kMax)
            .ok());
    bad = 0;
    for (size_t j = 0; j < uneven; ++j) {
      float want = Fp32Input(0, j);
      for (int r = 1; r < n; ++r) want = std::max(want, Fp32Input(r, j));
      if (buf[j] != want) ++bad;
    }
    EXPECT_EQ(bad, 0u) << "all-reduce max rank " << rank;
  });
}

TEST_P(GlooAlgorithmTest, IntegersReduceExactlyInPlace) {
  const int n = ranks();
  const size_t count = 5003;
  RunRanks(n, [&](int rank) {
    auto comm = CreateCommunicator(Options(rank));
    ASSERT_TRUE(comm.ok()) << comm.status();
    // int64 values past 2^53 would be wrong if anything went through fp32.
    std::vector<int64_t> big(count * n);
    for (size_t j = 0; j < big.size(); ++j) {
      big[j] = (int64_t{1} << 60) / 16 * (rank + 1) + static_cast<int64_t>(j);
    }
    int64_t* own = big.data() + rank * count;
    ASSERT_TRUE((*comm)
                    ->ReduceScatter(big.data(), own, count, DataType::kInt64,
                                    ReduceOp::kSum)
                    .ok());
    size_t bad = 0;
    for (size_t i = 0; i < count; ++i) {
      int64_t want = 0;
      for (int r = 0; r < n; ++r) {
        want += (int64_t{1} << 60) / 16 * (r + 1) +
                static_cast<int64_t>(rank * count + i);
      }
      if (own[i] != want) ++bad;
    }
    EXPECT_EQ(bad, 0u) << "int64 in-place reduce-scatter rank " << rank;

    std::vector<uint8_t> bytes(count * n);
    for (size_t j = 0; j < bytes.size(); ++j) bytes[j] = 200 + rank + j % 7;
    ASSERT_TRUE((*comm)
                    ->AllReduce(bytes.data(), bytes.size(), DataType::kUint8,
                                ReduceOp::kSum)
                    .ok());
    bad = 0;
    for (size_t j = 0; j < bytes.size(); ++j) {
      unsigned want = 0;
      for (int r = 0; r < n; ++r) want += 200 + r + j % 7;
      if (bytes[j] != static_cast<uint8_t>(want)) ++bad;
    }
    EXPECT_EQ(bad, 0u) << "uint8 wrapping all-reduce rank " << rank;
  });
}

INSTANTIATE_TEST_SUITE_P(
    Gloo, GlooAlgorithmTest,
    ::testing::Combine(::testing::Bool(), ::testing::Values(2, 3, 5),
                       ::testing::Values(1, 3),
                       ::testing::Values(HostTransport::kTcp,
                                         HostTransport::kShm)),
    [](const auto& info) {
      return absl::StrCat(std::get<0>(info.param) ? "ring" : "pairwise", "_",
                          std::get<1>(info.param), "ranks_depth",
                          std::get<2>(info.param), "_",
                          HostTransportName(std::get<3>(info.param)));
    });

}  // namespace
}  // namespace zshard::comm
