// The shm transport on its own: the choice between shm and tcp (host
// identities injected per rank), a cancelled rendezvous, a group of 16 with
// smaller rings, messages larger than a ring and messages that arrive before
// their receive (with and without the single copy), and the names of the
// host transports.
#include "client/worker/comm/shm_transport.h"

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "client/worker/comm/communicator.h"
#include "client/worker/comm/memory_kv_store.h"
#include "gtest/gtest.h"
#include "tests/worker/comm/comm_test_util.h"

namespace zshard::comm {
namespace {

using ::zshard::comm::testing::RunRanks;

CommOptions Options(int rank, int size, KvStore* store, HostTransport t,
                    const std::string& identity) {
  CommOptions o;
  o.rank = rank;
  o.size = size;
  o.group = "select";
  o.store = store;
  o.timeout_ms = 10000;
  o.host_transport = t;
  o.host_identity = identity;
  return o;
}

TEST(HostTransportTest, NamesRoundTripAndBadNameIsNamed) {
  for (HostTransport t :
       {HostTransport::kAuto, HostTransport::kTcp, HostTransport::kShm}) {
    auto parsed = ParseHostTransport(HostTransportName(t));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, t);
  }
  auto bad = ParseHostTransport("udp");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "'udp'"));
}

TEST(ShmSelectionTest, AutoPicksShmOnOneHost) {
  MemoryKvStore store;
  RunRanks(3, [&](int rank) {
    auto comm =
        CreateCommunicator(Options(rank, 3, &store, HostTransport::kAuto, ""));
    ASSERT_TRUE(comm.ok()) << comm.status();
    EXPECT_EQ((*comm)->transport(), "shm");
    EXPECT_EQ((*comm)->backend(), "gloo");
    EXPECT_TRUE((*comm)->Barrier().ok());
  });
}

TEST(ShmSelectionTest, AutoFallsBackToTcpWhenARankIsElsewhere) {
  MemoryKvStore store;
  RunRanks(3, [&](int rank) {
    auto comm =
        CreateCommunicator(Options(rank, 3, &store, HostTransport::kAuto,
                                   rank == 1 ? "host-b" : "host-a"));
    ASSERT_TRUE(comm.ok()) << comm.status();
    EXPECT_EQ((*comm)->transport(), "tcp");
    std::vector<float> buf(1000, static_cast<float>(rank + 1));
    ASSERT_TRUE(
        (*comm)
            ->AllReduce(buf.data(), buf.size(), DataType::kFp32, ReduceOp::kSum)
            .ok());
    EXPECT_EQ(buf[999], 6.0f);
  });
}

TEST(ShmSelectionTest, ShmFailsWithFailedPreconditionNamingTheRank) {
  MemoryKvStore store;
  RunRanks(3, [&](int rank) {
    auto comm = CreateCommunicator(Options(rank, 3, &store, HostTransport::kShm,
                                           rank == 2 ? "host-b" : "host-a"));
    EXPECT_EQ(comm.status().code(), absl::StatusCode::kFailedPrecondition)
        << comm.status();
    EXPECT_TRUE(absl::StrContains(comm.status().message(), "rank 2"))
        << comm.status();
  });
}

TEST(ShmGroupTest, SixteenRanksShareSmallerRings) {
  EXPECT_EQ(DefaultShmRingCapacity(4), uint64_t{1} << 20);
  EXPECT_EQ(DefaultShmRingCapacity(16), uint64_t{256} << 10);
  EXPECT_EQ(DefaultShmRingCapacity(64), uint64_t{64} << 10);
  MemoryKvStore store;
  RunRanks(16, [&](int rank) {
    auto comm =
        CreateCommunicator(Options(rank, 16, &store, HostTransport::kShm, ""));
    ASSERT_TRUE(comm.ok()) << comm.status();
    std::vector<int64_t> buf(100000, rank);
    ASSERT_TRUE((*comm)
                    ->AllReduce(buf.data(), buf.size(), DataType::kInt64,
                                ReduceOp::kSum)
                    .ok());
    EXPECT_EQ(buf[0], 120);
    EXPECT_EQ(buf[99999], 120);
  });
}

// A MemoryKvStore whose rendezvous can be cancelled.
class CancellableStore final : public KvStore {
 public:
  absl::Status Set(absl::string_view key, absl::string_view value) override {
    return inner_.Set(key, value);
  }
  absl::StatusOr<std::string> Get(absl::string_view key,
                                  int64_t timeout_ms) override {
    return inner_.Get(key, timeout_ms);
  }
  absl::Status Wait(const std::vector<std::string>& keys,
                    int64_t timeout_ms) override {
    return inner_.Wait(keys, timeout_ms);
  }
  bool cancelled() const override { return cancelled_.load(); }

  MemoryKvStore inner_;
  std::atomic<bool> cancelled_{false};
};

TEST(ShmConnectTest, CancelledRendezvousEndsPromptlyWithAborted) {
  CancellableStore store;
  absl::StatusOr<std::unique_ptr<Communicator>> comm;
  std::thread rank0([&] {
    comm = CreateCommunicator(
        Options(0, 2, &store, HostTransport::kShm, ""));  // rank 1 never comes
  });
  ASSERT_TRUE(store.inner_.Wait({"shm/select/peer/0"}, 10000).ok());
  const absl::Time start = absl::Now();
  store.cancelled_ = true;
  rank0.join();
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
  EXPECT_EQ(comm.status().code(), absl::StatusCode::kAborted) << comm.status();
}

// Two transports with 4 KiB rings, driven directly; the parameter turns the
// single copy of large messages on or off (off: they stream through the
// ring).
class ShmRingTest : public ::testing::TestWithParam<bool> {
 protected:
  template <typename Fn>
  void RunPair(Fn fn) {
    RunRanks(2, [&](int rank) {
      ShmTransport::Options o;
      o.rank = rank;
      o.size = 2;
      o.group = "rings";
      o.store = &store_;
      o.timeout_ms = 10000;
      o.ring_capacity = 4096;
      o.single_copy = GetParam();
      auto t = ShmTransport::Connect(o);
      ASSERT_TRUE(t.ok()) << t.status();
      fn(rank, **t);
    });
  }

  MemoryKvStore store_;
};

TEST_P(ShmRingTest, MessagesLargerThanTheRingArriveWhole) {
  constexpr size_t kBytes = 300007;
  RunPair([&](int rank, ShmTransport& t) {
    std::vector<char> buf(kBytes);
    auto region = t.Register(buf.data(), buf.size());
    ASSERT_TRUE(region.ok());
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    if (rank == 0) {
      for (size_t i = 0; i < kBytes; ++i) buf[i] = static_cast<char>(i * 7);
      ASSERT_TRUE((*region)->PostSend(1, 5, 0, kBytes).ok());
      ASSERT_TRUE((*region)->WaitSend(deadline).ok());
    } else {
      ASSERT_TRUE((*region)->PostRecv(0, 5, 0, kBytes).ok());
      ASSERT_TRUE((*region)->WaitRecv(deadline).ok());
      size_t bad = 0;
      for (size_t i = 0; i < kBytes; ++i) {
        bad += buf[i] != static_cast<char>(i * 7);
      }
      EXPECT_EQ(bad, 0u);
    }
  });
}

TEST_P(ShmRingTest, EarlyMessagesWaitForTheirReceive) {
  // Rank 0 sends slots 1, 2, 3 (each larger than the ring); rank 1 receives
  // them in the order 3, 1, 2: the first two go to the heap meanwhile.
  constexpr size_t kBytes = 100000;
  RunPair([&](int rank, ShmTransport& t) {
    std::vector<char> buf(3 * kBytes);
    auto region = t.Register(buf.data(), buf.size());
    ASSERT_TRUE(region.ok());
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    if (rank == 0) {
      for (int m = 0; m < 3; ++m) {
        std::memset(buf.data() + m * kBytes, 'a' + m, kBytes);
        ASSERT_TRUE((*region)->PostSend(1, m + 1, m * kBytes, kBytes).ok());
      }
      for (int m = 0; m < 3; ++m) {
        ASSERT_TRUE((*region)->WaitSend(deadline).ok());
      }
      return;
    }
    for (int m : {2, 0, 1}) {
      ASSERT_TRUE((*region)->PostRecv(0, m + 1, m * kBytes, kBytes).ok());
      ASSERT_TRUE((*region)->WaitRecv(deadline).ok());
      EXPECT_EQ(buf[m * kBytes], 'a' + m);
      EXPECT_EQ(buf[m * kBytes + kBytes - 1], 'a' + m);
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Copies, ShmRingTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "SingleCopy" : "ThroughRing";
                         });

}  // namespace
}  // namespace zshard::comm
