// The fault half of the conformance suite: a peer lost mid-collective, a
// rank that never joins the rendezvous, an abort from another thread and an
// operation timeout each end with a clear status well within the timeout.
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/worker/comm/failed_peer.h"
#include "client/worker/comm/memory_kv_store.h"
#include "tests/worker/comm/conformance_suite.h"

namespace zshard::comm::testing {
namespace {

constexpr size_t kCount = size_t{1} << 20;  // 4 MiB of fp32

}  // namespace

void CommFaults::SetUp() {
  if (!GetParam().can_run(3)) {
    GTEST_SKIP() << GetParam().name << " cannot run 3 ranks here";
  }
  space_ = GetParam().make_space();
  store_ = std::make_unique<MemoryKvStore>();
}

CommOptions CommFaults::Options(int rank, int size, int64_t timeout_ms) const {
  CommOptions o;
  o.rank = rank;
  o.size = size;
  o.group = "faults";
  o.store = store_.get();
  o.timeout_ms = timeout_ms;
  o.device = GetParam().device;
  o.cuda_device = rank;
  o.host_transport = GetParam().host_transport;
  return o;
}

TEST_P(CommFaults, LostPeerFailsCollectiveWithUnavailable) {
  std::atomic<int> started{0};
  // The peer each surviving rank's failure names (host backends).
  std::optional<FailedPeer> named[2];
  std::string messages[2];
  absl::Notification both_started;
  RunRanks(3, [&](int rank) {
    auto comm = CreateCommunicator(Options(rank, 3, 20000));
    ASSERT_TRUE(comm.ok()) << comm.status();
    ASSERT_TRUE((*comm)->Barrier().ok());
    if (rank == 2) {
      both_started.WaitForNotification();
      comm->reset();  // the peer dies: its connections close
      return;
    }
    TestBuffer buf(space_.get(), rank, DataType::kFp32, kCount);
    if (started.fetch_add(1) == 1) both_started.Notify();
    const absl::Time start = absl::Now();
    absl::Status s =
        (*comm)->AllReduce(buf.data(), kCount, DataType::kFp32, ReduceOp::kSum);
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
    EXPECT_LT(absl::Now() - start, absl::Seconds(10));
    named[rank] = FailedPeerOf(s);
    messages[rank] = std::string(s.message());
    EXPECT_FALSE((*comm)->Barrier().ok())
        << "a broken communicator stays broken";
  });
  if (GetParam().device != CommDevice::kCpu) return;  // NCCL names no peer
  // Rank 2 went away; a survivor may also fail on the other survivor
  // shutting its connections after its own failure. Over tcp on one host
  // a peer that connected to this rank cannot be named (its ephemeral port
  // is all the error says, on the one loopback address): a name, when
  // there is one, is a peer of the group whose connection closed.
  for (int rank = 0; rank < 2; ++rank) {
    const std::optional<FailedPeer>& peer = named[rank];
    if (GetParam().host_transport == HostTransport::kShm) {
      EXPECT_TRUE(peer.has_value()) << messages[rank];
    }
    if (!peer.has_value()) continue;
    EXPECT_EQ(peer->group, "faults");
    EXPECT_TRUE(peer->closed) << messages[rank];
    EXPECT_TRUE(peer->rank == 2 || peer->rank == 1 - rank) << messages[rank];
  }
}

TEST_P(CommFaults, MissingRankFailsRendezvousWithDeadlineExceeded) {
  RunRanks(2, [&](int rank) {
    const absl::Time start = absl::Now();
    auto comm = CreateCommunicator(Options(rank, 3, 300));
    EXPECT_EQ(comm.status().code(), absl::StatusCode::kDeadlineExceeded)
        << comm.status();
    EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  });
}

TEST_P(CommFaults, AbortFromAnotherThreadEndsPendingOperation) {
  absl::Notification entering;
  absl::Notification aborted;
  RunRanks(2, [&](int rank) {
    auto comm = CreateCommunicator(Options(rank, 2, 20000));
    ASSERT_TRUE(comm.ok()) << comm.status();
    ASSERT_TRUE((*comm)->Barrier().ok());
    if (rank == 1) {
      // Never joins the all-reduce; learns of the abort through its peer.
      aborted.WaitForNotification();
      const absl::Time start = absl::Now();
      EXPECT_FALSE((*comm)->Barrier().ok());
      EXPECT_LT(absl::Now() - start, absl::Seconds(10));
      return;
    }
    std::thread aborter([&] {
      entering.WaitForNotification();
      (*comm)->Abort();
    });
    TestBuffer buf(space_.get(), rank, DataType::kFp32, kCount);
    const absl::Time start = absl::Now();
    entering.Notify();
    absl::Status s =
        (*comm)->AllReduce(buf.data(), kCount, DataType::kFp32, ReduceOp::kSum);
    aborter.join();
    EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
    EXPECT_LT(absl::Now() - start, absl::Seconds(5));
    EXPECT_EQ((*comm)->Barrier().code(), absl::StatusCode::kAborted);
    aborted.Notify();
  });
}

TEST_P(CommFaults, SilentPeerFailsOperationWithDeadlineExceeded) {
  absl::Notification timed_out;
  RunRanks(2, [&](int rank) {
    auto comm = CreateCommunicator(Options(rank, 2, 300));
    ASSERT_TRUE(comm.ok()) << comm.status();
    if (rank == 1) {
      timed_out.WaitForNotification();
      EXPECT_FALSE((*comm)->Barrier().ok());
      return;
    }
    TestBuffer buf(space_.get(), rank, DataType::kFp32, kCount);
    const absl::Time start = absl::Now();
    absl::Status s =
        (*comm)->AllReduce(buf.data(), kCount, DataType::kFp32, ReduceOp::kSum);
    const absl::Duration took = absl::Now() - start;
    timed_out.Notify();
    EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
    EXPECT_GE(took, absl::Milliseconds(250));
    EXPECT_LT(took, absl::Seconds(5));
    if (GetParam().device == CommDevice::kCpu) {
      // In a group of two a timeout can only be about the other rank, and
      // its connection did not close.
      const std::optional<FailedPeer> peer = FailedPeerOf(s);
      ASSERT_TRUE(peer.has_value()) << s;
      EXPECT_EQ(peer->rank, 1);
      EXPECT_FALSE(peer->closed);
    }
  });
}

}  // namespace zshard::comm::testing
