// The communicator conformance suite (see conformance_suite.h): exact
// results for every collective, type, operator and size, ranks 1..8, the
// bf16 precision of one fp32 rounding, send/recv and barrier.
#include "tests/worker/comm/conformance_suite.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/worker/comm/memory_kv_store.h"
#include "client/worker/comm/numerics.h"

namespace zshard::comm::testing {
namespace {

constexpr DataType kAllTypes[] = {DataType::kBf16, DataType::kFp16,
                                  DataType::kFp32, DataType::kInt64,
                                  DataType::kUint8};

// Rank r's input element j: small integers, so that every sum over up to 8
// ranks is exact in every type.
double Input(DataType dtype, int r, size_t j) {
  const double v = static_cast<double>((r * 7 + j * 3 + 1) % 17);
  return dtype == DataType::kUint8 ? v : v - 8;
}

double Reduce(DataType dtype, ReduceOp op, int ranks, size_t j) {
  double acc = Input(dtype, 0, j);
  for (int r = 1; r < ranks; ++r) {
    const double v = Input(dtype, r, j);
    acc = op == ReduceOp::kSum ? acc + v : std::max(acc, v);
  }
  return acc;
}

// Counts mismatches of buf against expected(i), reporting the first.
template <typename Fn>
void ExpectElements(const TestBuffer& buf, size_t count, Fn expected,
                    const std::string& what) {
  size_t bad = 0;
  for (size_t i = 0; i < count; ++i) {
    if (buf.Get(i) != expected(i)) {
      if (bad == 0) {
        ADD_FAILURE() << what << ": element " << i << " is " << buf.Get(i)
                      << ", want " << expected(i);
      }
      ++bad;
    }
  }
  EXPECT_EQ(bad, 0u) << what;
}

}  // namespace

void CommConformance::SetUp() {
  if (!backend().can_run(ranks())) {
    GTEST_SKIP() << backend().name << " cannot run " << ranks()
                 << " ranks here";
  }
  space_ = backend().make_space();
  store_ = std::make_unique<MemoryKvStore>();
}

CommOptions CommConformance::Options(int rank) const {
  CommOptions o;
  o.rank = rank;
  o.size = ranks();
  o.group = "conformance";
  o.store = store_.get();
  o.timeout_ms = 20000;
  o.device = backend().device;
  o.cuda_device = rank;
  o.host_transport = backend().host_transport;
  return o;
}

TEST_P(CommConformance, CollectivesMatchExactResults) {
  const int n = ranks();
  RunRanks(n, [&](int rank) {
    CommOptions options = Options(rank);
    options.chunk_bytes = 4096;  // many chunks per message: deep pipelines
    auto comm = CreateCommunicator(options);
    ASSERT_TRUE(comm.ok()) << comm.status();
    Communicator& c = **comm;
    for (DataType dtype : kAllTypes) {
      for (size_t count : {size_t{0}, size_t{1}, size_t{5003}}) {
        const std::string where =
            absl::StrCat(DataTypeName(dtype), " count ", count, " rank ", rank);
        TestBuffer full(space_.get(), rank, dtype, count * n);
        TestBuffer part(space_.get(), rank, dtype, count);
        // all-gather: block k of the result is rank k's input.
        for (size_t i = 0; i < count; ++i) part.Set(i, Input(dtype, rank, i));
        part.Upload();
        ASSERT_TRUE(c.AllGather(part.data(), full.data(), count, dtype).ok());
        full.Download();
        ExpectElements(
            full, count * n,
            [&](size_t j) { return Input(dtype, j / count, j % count); },
            "all-gather " + where);
        for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
          const std::string what = absl::StrCat(ReduceOpName(op), " ", where);
          for (size_t j = 0; j < count * n; ++j) {
            full.Set(j, Input(dtype, rank, j));
          }
          full.Upload();
          absl::Status s =
              c.ReduceScatter(full.data(), part.data(), count, dtype, op);
          ASSERT_TRUE(s.ok()) << s;
          part.Download();
          ExpectElements(
              part, count,
              [&](size_t i) { return Reduce(dtype, op, n, rank * count + i); },
              "reduce-scatter " + what);
          s = c.AllReduce(full.data(), count * n, dtype, op);
          ASSERT_TRUE(s.ok()) << s;
          full.Download();
          ExpectElements(
              full, count * n,
              [&](size_t j) { return Reduce(dtype, op, n, j); },
              "all-reduce " + what);
        }
      }
    }
  });
}

TEST_P(CommConformance, InPlaceCollectives) {
  const int n = ranks();
  const size_t count = 777;
  const DataType dtype = DataType::kFp32;
  RunRanks(n, [&](int rank) {
    auto comm = CreateCommunicator(Options(rank));
    ASSERT_TRUE(comm.ok()) << comm.status();
    const size_t own = rank * count * DataTypeSize(dtype);
    TestBuffer buf(space_.get(), rank, dtype, count * n);
    for (size_t j = 0; j < count * n; ++j) buf.Set(j, Input(dtype, rank, j));
    buf.Upload();
    char* base = static_cast<char*>(buf.data());
    absl::Status s =
        (*comm)->ReduceScatter(base, base + own, count, dtype, ReduceOp::kSum);
    ASSERT_TRUE(s.ok()) << s;
    // The own block now holds the reduction; gather it in place.
    s = (*comm)->AllGather(base + own, base, count, dtype);
    ASSERT_TRUE(s.ok()) << s;
    buf.Download();
    ExpectElements(
        buf, count * n,
        [&](size_t j) { return Reduce(dtype, ReduceOp::kSum, n, j); },
        absl::StrCat("in-place reduce-scatter + all-gather rank ", rank));
  });
}

TEST_P(CommConformance, LargeMessagesPipelineInChunks) {
  const int n = ranks();
  RunRanks(n, [&](int rank) {
    auto comm = CreateCommunicator(Options(rank));
    ASSERT_TRUE(comm.ok()) << comm.status();
    for (DataType dtype : {DataType::kFp32, DataType::kBf16}) {
      // About 2 MiB per rank, not a multiple of the 1 MiB chunk.
      const size_t count = (size_t{2} << 20) / DataTypeSize(dtype) / n + 3;
      const std::string where =
          absl::StrCat(DataTypeName(dtype), " large, rank ", rank);
      TestBuffer full(space_.get(), rank, dtype, count * n);
      TestBuffer part(space_.get(), rank, dtype, count);
      for (size_t j = 0; j < count * n; ++j) full.Set(j, Input(dtype, rank, j));
      full.Upload();
      absl::Status s = (*comm)->ReduceScatter(full.data(), part.data(), count,
                                              dtype, ReduceOp::kSum);
      ASSERT_TRUE(s.ok()) << s;
      part.Download();
      ExpectElements(
          part, count,
          [&](size_t i) {
            return Reduce(dtype, ReduceOp::kSum, n, rank * count + i);
          },
          "reduce-scatter " + where);
      s = (*comm)->AllReduce(full.data(), count * n, dtype, ReduceOp::kSum);
      ASSERT_TRUE(s.ok()) << s;
      full.Download();
      ExpectElements(
          full, count * n,
          [&](size_t j) { return Reduce(dtype, ReduceOp::kSum, n, j); },
          "all-reduce " + where);
      for (size_t i = 0; i < count; ++i) part.Set(i, Input(dtype, rank, i));
      part.Upload();
      s = (*comm)->AllGather(part.data(), full.data(), count, dtype);
      ASSERT_TRUE(s.ok()) << s;
      full.Download();
      ExpectElements(
          full, count * n,
          [&](size_t j) { return Input(dtype, j / count, j % count); },
          "all-gather " + where);
    }
  });
}

// bf16 sums accumulate in fp32 and round once: the result equals the
// rounded fp32 sum in rank order bit for bit, stays within half a bf16 ulp
// (plus fp32 accumulation error) of the exact sum, and beats a ring that
// rounds to bf16 at every hop.
TEST_P(CommConformance, Bf16SumRoundsOnce) {
  const int n = ranks();
  const size_t count = 4096;
  // Reproducible bf16 values in [-1, 1) from a hash of (rank, index).
  auto input = [](int r, size_t i) {
    uint64_t h = (static_cast<uint64_t>(r) << 32 | i) * 0x9e3779b97f4a7c15ull;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 32;
    const float u = static_cast<float>(h >> 40) * 0x1p-24f;  // [0, 1)
    return Bf16ToFloat(FloatToBf16(2 * u - 1));
  };
  std::vector<double> result(count);
  RunRanks(n, [&](int rank) {
    auto comm = CreateCommunicator(Options(rank));
    ASSERT_TRUE(comm.ok()) << comm.status();
    TestBuffer buf(space_.get(), rank, DataType::kBf16, count);
    for (size_t i = 0; i < count; ++i) buf.Set(i, input(rank, i));
    buf.Upload();
    absl::Status s =
        (*comm)->AllReduce(buf.data(), count, DataType::kBf16, ReduceOp::kSum);
    ASSERT_TRUE(s.ok()) << s;
    buf.Download();
    if (rank == 0) {
      for (size_t i = 0; i < count; ++i) result[i] = buf.Get(i);
    }
  });
  double ours_error = 0;
  double ring_error = 0;
  size_t not_bitwise = 0;
  size_t out_of_bound = 0;
  for (size_t i = 0; i < count; ++i) {
    float fp32_sum = 0;
    float ring = 0;
    double exact = 0;
    double magnitude = 0;
    for (int r = 0; r < n; ++r) {
      const float x = input(r, i);
      fp32_sum += x;
      ring = r == 0 ? x : Bf16ToFloat(FloatToBf16(ring + x));
      exact += x;
      magnitude += std::fabs(x);
    }
    if (result[i] != Bf16ToFloat(FloatToBf16(fp32_sum))) ++not_bitwise;
    const double half_ulp =
        exact == 0 ? 0 : std::ldexp(1.0, std::ilogb(exact) - 8);
    if (std::fabs(result[i] - exact) > half_ulp + n * magnitude * 0x1p-24) {
      ++out_of_bound;
    }
    ours_error += std::fabs(result[i] - exact);
    ring_error += std::fabs(ring - exact);
  }
  EXPECT_EQ(not_bitwise, 0u);
  EXPECT_EQ(out_of_bound, 0u);
  if (n >= 3) {
    EXPECT_LT(ours_error, ring_error)
        << "mean error " << ours_error / count << " vs per-hop rounding "
        << ring_error / count;
  }
}

TEST_P(CommConformance, SendRecvMovesBytesInOrder) {
  const int n = ranks();
  if (n < 2) GTEST_SKIP() << "send/recv needs two ranks";
  const size_t big = (size_t{3} << 20) + 5;
  RunRanks(n, [&](int rank) {
    auto comm = CreateCommunicator(Options(rank));
    ASSERT_TRUE(comm.ok()) << comm.status();
    const int peer = rank ^ 1;
    // Gloo fails every pending operation of a group when any peer closes
    // its connections, so no rank leaves before every exchange is done.
    auto exchange = [&] {
      if (peer >= n) return;  // the odd one out has no partner
      TestBuffer small(space_.get(), rank, DataType::kUint8, 13);
      TestBuffer large(space_.get(), rank, DataType::kUint8, big);
      if (rank % 2 == 0) {
        for (size_t i = 0; i < 13; ++i) small.Set(i, i + rank);
        for (size_t i = 0; i < big; ++i) large.Set(i, (i * 31) % 251);
        small.Upload();
        large.Upload();
        ASSERT_TRUE((*comm)->Send(peer, small.data(), 13, 7).ok());
        ASSERT_TRUE((*comm)->Send(peer, large.data(), big, 9).ok());
        ASSERT_TRUE((*comm)->Send(peer, nullptr, 0, 9).ok());
        absl::Status s = (*comm)->Recv(peer, small.data(), 13, 7);
        ASSERT_TRUE(s.ok()) << s;
        small.Download();
        ExpectElements(
            small, 13, [&](size_t i) { return double(i + rank + 1); }, "reply");
      } else {
        absl::Status s = (*comm)->Recv(peer, small.data(), 13, 7);
        ASSERT_TRUE(s.ok()) << s;
        s = (*comm)->Recv(peer, large.data(), big, 9);
        ASSERT_TRUE(s.ok()) << s;
        ASSERT_TRUE((*comm)->Recv(peer, nullptr, 0, 9).ok());
        small.Download();
        large.Download();
        ExpectElements(
            small, 13, [&](size_t i) { return double(i + peer); }, "small");
        ExpectElements(
            large, big, [&](size_t i) { return double((i * 31) % 251); },
            "large");
        for (size_t i = 0; i < 13; ++i) small.Set(i, i + peer + 1);
        small.Upload();
        ASSERT_TRUE((*comm)->Send(peer, small.data(), 13, 7).ok());
      }
    };
    exchange();
    EXPECT_TRUE((*comm)->Barrier().ok());
  });
}

TEST_P(CommConformance, BarrierWaitsForEveryRank) {
  const int n = ranks();
  std::atomic<int> arrived{0};
  std::atomic<int> second{0};
  RunRanks(n, [&](int rank) {
    auto comm = CreateCommunicator(Options(rank));
    ASSERT_TRUE(comm.ok()) << comm.status();
    if (!backend().transport.empty()) {
      EXPECT_EQ((*comm)->transport(), backend().transport);
    }
    arrived.fetch_add(1);
    ASSERT_TRUE((*comm)->Barrier().ok());
    EXPECT_EQ(arrived.load(), n);
    second.fetch_add(1);
    ASSERT_TRUE((*comm)->Barrier().ok());
    EXPECT_EQ(second.load(), n);
  });
}

std::string ConformanceName(
    const ::testing::TestParamInfo<std::tuple<Backend, int>>& info) {
  return absl::StrCat(std::get<0>(info.param).name, "_",
                      std::get<1>(info.param), "ranks");
}

std::string FaultsName(const ::testing::TestParamInfo<Backend>& info) {
  return info.param.name;
}

}  // namespace zshard::comm::testing
