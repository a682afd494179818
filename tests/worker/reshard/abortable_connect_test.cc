// A communicator being created on an AbortableStore stops promptly when the
// store's flag is raised: in the rendezvous while a peer never comes, and in
// the pair connect after a dead peer published its address. A Recv blocked
// on a silent peer ends at Abort(). Each ends within 2 s of the abort,
// against a 30 s communicator timeout. Over tcp and shared memory.
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/synchronization/notification.h"
#include "client/worker/comm/communicator.h"
#include "client/worker/comm/memory_kv_store.h"
#include "client/worker/reshard/abortable_store.h"
#include "gtest/gtest.h"
#include "tests/testing/wait_for.h"

namespace zshard::reshard {
namespace {

constexpr int64_t kTimeoutMs = 30000;
constexpr auto kPrompt = std::chrono::seconds(2);

using Clock = std::chrono::steady_clock;

// Forwards to a store but never shows keys containing `hidden` (a peer
// that published its address, then waits for ever and dies).
class HidingStore final : public comm::KvStore {
 public:
  HidingStore(comm::KvStore* inner, std::string hidden)
      : inner_(inner), hidden_(std::move(hidden)) {}

  absl::Status Set(absl::string_view key, absl::string_view value) override {
    return inner_->Set(key, value);
  }
  absl::StatusOr<std::string> Get(absl::string_view key,
                                  int64_t timeout_ms) override {
    if (absl::StrContains(key, hidden_)) return Hidden(timeout_ms);
    return inner_->Get(key, timeout_ms);
  }
  absl::Status Wait(const std::vector<std::string>& keys,
                    int64_t timeout_ms) override {
    for (const std::string& k : keys) {
      if (absl::StrContains(k, hidden_)) return Hidden(timeout_ms);
    }
    return inner_->Wait(keys, timeout_ms);
  }

 private:
  // Waits as a missing key does: until the timeout.
  absl::Status Hidden(int64_t timeout_ms) {
    absl::Status s = inner_->Wait({"never/set"}, timeout_ms);
    return s.ok() ? absl::InternalError("unexpected key") : s;
  }

  comm::KvStore* const inner_;
  const std::string hidden_;
};

comm::CommOptions Options(int rank, comm::KvStore* store,
                          comm::HostTransport transport) {
  comm::CommOptions o;
  o.host_transport = transport;
  o.rank = rank;
  o.size = 2;
  o.group = "cancel";
  o.store = store;
  o.timeout_ms = kTimeoutMs;
  return o;
}

// Runs over Gloo's tcp pairs and over shared memory.
class AbortableConnectTest
    : public ::testing::TestWithParam<comm::HostTransport> {};

TEST_P(AbortableConnectTest, CancelDuringTheRendezvousReturnsAborted) {
  comm::MemoryKvStore store;
  std::atomic<bool> cancelled{false};
  AbortableStore abortable(&store, &cancelled);
  absl::StatusOr<std::unique_ptr<comm::Communicator>> comm;
  std::thread rank0([&] {
    comm = comm::CreateCommunicator(Options(0, &abortable, GetParam()));
  });
  // Rank 0 published its address; rank 1 never comes.
  ASSERT_TRUE(testing::WaitFor([&] { return store.size() > 0; }, 10000));
  const Clock::time_point t0 = Clock::now();
  cancelled = true;
  rank0.join();
  EXPECT_LT(Clock::now() - t0, kPrompt);
  EXPECT_EQ(comm.status().code(), absl::StatusCode::kAborted) << comm.status();
}

// Gloo's pair connect: tcp only.
TEST(AbortableTcpConnectTest, CancelDuringTheConnectToADeadPeerEndsPromptly) {
  constexpr comm::HostTransport kTcp = comm::HostTransport::kTcp;
  // Twice: whether this rank listens for the dead peer (it would wait out
  // the connect timeout) or connects to it (refused) depends on ports.
  for (int trial = 0; trial < 2; ++trial) {
    SCOPED_TRACE(trial);
    comm::MemoryKvStore store;
    // Rank 1 publishes its address, never sees rank 0's, and dies.
    HidingStore hiding(&store, "cancel/0");
    std::atomic<bool> dead{false};
    AbortableStore peer_store(&hiding, &dead);
    absl::StatusOr<std::unique_ptr<comm::Communicator>> peer;
    std::thread rank1([&] {
      peer = comm::CreateCommunicator(Options(1, &peer_store, kTcp));
    });
    ASSERT_TRUE(testing::WaitFor([&] { return store.size() > 0; }, 10000));
    dead = true;
    rank1.join();
    ASSERT_EQ(peer.status().code(), absl::StatusCode::kAborted)
        << peer.status();

    std::atomic<bool> cancelled{false};
    AbortableStore abortable(&store, &cancelled);
    absl::StatusOr<std::unique_ptr<comm::Communicator>> comm;
    const Clock::time_point start = Clock::now();
    std::thread rank0(
        [&] { comm = comm::CreateCommunicator(Options(0, &abortable, kTcp)); });
    // Rank 0 has read the dead peer's address once its own is in.
    ASSERT_TRUE(testing::WaitFor([&] { return store.size() > 1; }, 10000));
    cancelled = true;
    const Clock::time_point t0 = Clock::now();
    rank0.join();
    EXPECT_LT(Clock::now() - t0, kPrompt);
    EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
    ASSERT_FALSE(comm.ok());
    EXPECT_TRUE(absl::IsAborted(comm.status()) ||
                absl::IsUnavailable(comm.status()))
        << comm.status();
  }
}

TEST_P(AbortableConnectTest, AbortEndsARecvBlockedOnASilentPeer) {
  comm::MemoryKvStore store;
  std::vector<std::unique_ptr<comm::Communicator>> comms(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      auto c = comm::CreateCommunicator(Options(r, &store, GetParam()));
      ASSERT_TRUE(c.ok()) << c.status();
      comms[r] = *std::move(c);
    });
  }
  for (std::thread& t : threads) t.join();
  ASSERT_TRUE(comms[0] && comms[1]);
  std::vector<char> buf(1024);
  absl::Notification receiving;
  absl::Status status;
  Clock::time_point done;
  std::thread receiver([&] {
    receiving.Notify();
    status = comms[0]->Recv(1, buf.data(), buf.size(), /*tag=*/7);
    done = Clock::now();
  });
  receiving.WaitForNotification();
  const Clock::time_point t0 = Clock::now();
  comms[0]->Abort();  // returns at once: it never waits for the receiver
  EXPECT_LT(Clock::now() - t0, std::chrono::milliseconds(500));
  receiver.join();
  EXPECT_LT(done - t0, kPrompt);
  EXPECT_EQ(status.code(), absl::StatusCode::kAborted) << status;
}

INSTANTIATE_TEST_SUITE_P(Transports, AbortableConnectTest,
                         ::testing::Values(comm::HostTransport::kTcp,
                                           comm::HostTransport::kShm),
                         [](const auto& info) {
                           return std::string(
                               comm::HostTransportName(info.param));
                         });

}  // namespace
}  // namespace zshard::reshard
