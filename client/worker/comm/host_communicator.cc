// HostCommunicator: deadlines, sticky failure and abort around the host
// collectives on a PeerTransport (Gloo's TCP pairs or shared memory), and
// the choice between the two.
#include "client/worker/comm/host_communicator.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/worker/comm/failed_peer.h"
#include "client/worker/comm/gloo_transport.h"
#include "client/worker/comm/host_collectives.h"
#include "client/worker/comm/shm_transport.h"

namespace zshard::comm {
namespace {

// The host algorithms' chunking: the caller's, else the transport's default.
// Over shared memory every received chunk is copied by the receiver and
// reduced right away; a small scratch (3 peers x 2 x 256 KiB) stays in cache,
// which measured about 1.25x faster than the 1 MiB x 4 that suits tcp.
HostCollectives::Options CollectiveOptions(const CommOptions& options,
                                           absl::string_view transport) {
  const bool shm = transport == "shm";
  HostCollectives::Options o;
  o.chunk_bytes = options.chunk_bytes != 0
                      ? options.chunk_bytes
                      : (shm ? size_t{256} << 10 : size_t{1} << 20);
  o.depth =
      options.pipeline_depth != 0 ? options.pipeline_depth : (shm ? 2 : 4);
  o.ring = options.gloo_ring;
  return o;
}

// Thread safety as Communicator's: operations from one thread at a time
// (enforced by the base class); Abort() from any thread.
class HostCommunicator final : public Communicator {
 public:
  HostCommunicator(const CommOptions& options,
                   std::unique_ptr<PeerTransport> transport,
                   absl::string_view transport_name)
      : Communicator(options.rank, options.size),
        timeout_(absl::Milliseconds(options.timeout_ms)),
        group_(options.group),
        transport_name_(transport_name),
        transport_(std::move(transport)),
        collectives_(transport_.get(),
                     CollectiveOptions(options, transport_name)) {}

  ~HostCommunicator() override {
    // Every operation has returned. After a failure the transport was shut
    // down already (nothing writes into the scratch any more); after a
    // clean run nothing is pending, and what this rank sent last still
    // reaches a slower peer.
    transport_->Close();
  }

  absl::string_view backend() const override { return "gloo"; }
  absl::string_view transport() const override { return transport_name_; }

 private:
  // Runs one operation with a fresh deadline; the first failure breaks the
  // communicator for good.
  template <typename Fn>
  absl::Status Guard(Fn fn) {
    {
      absl::MutexLock lock(&mu_);
      if (!failure_.ok()) {
        return WithMessage(
            failure_,
            absl::StrCat("communicator failed earlier: ", failure_.message()));
      }
    }
    absl::Status s = NameOnlyPeer(fn(absl::Now() + timeout_));
    if (!s.ok()) {
      absl::MutexLock lock(&mu_);
      if (failure_.ok()) failure_ = s;
    }
    return s;
  }

  absl::Status DoReduceScatter(const void* sendbuf, void* recvbuf, size_t count,
                               DataType dtype, ReduceOp op) override {
    return Guard([&](absl::Time deadline) {
      return collectives_.ReduceScatter(sendbuf, recvbuf, count, dtype, op,
                                        deadline);
    });
  }
  absl::Status DoAllGather(const void* sendbuf, void* recvbuf, size_t count,
                           DataType dtype) override {
    return Guard([&](absl::Time deadline) {
      return collectives_.AllGather(sendbuf, recvbuf, count, dtype, deadline);
    });
  }
  absl::Status DoAllReduce(void* buf, size_t count, DataType dtype,
                           ReduceOp op) override {
    return Guard([&](absl::Time deadline) {
      return collectives_.AllReduce(buf, count, dtype, op, deadline);
    });
  }
  absl::Status DoSend(int peer, const void* buf, size_t bytes,
                      uint32_t tag) override {
    return Guard([&](absl::Time deadline) {
      return collectives_.Send(peer, buf, bytes, tag, deadline);
    });
  }
  absl::Status DoRecv(int peer, void* buf, size_t bytes,
                      uint32_t tag) override {
    return Guard([&](absl::Time deadline) {
      return collectives_.Recv(peer, buf, bytes, tag, deadline);
    });
  }
  absl::Status DoBarrier() override {
    return Guard(
        [&](absl::Time deadline) { return collectives_.Barrier(deadline); });
  }
  void DoAbort() override { transport_->Abort(); }

  // In a group of two a lost or timed-out operation can only be about the
  // other rank, even when the transport could not say which peer failed.
  absl::Status NameOnlyPeer(absl::Status s) const {
    if (size() != 2 || FailedPeerOf(s).has_value() ||
        (!absl::IsDeadlineExceeded(s) && !absl::IsUnavailable(s))) {
      return s;
    }
    const std::string message(s.message());
    return WithFailedPeer(
        std::move(s), FailedPeer{group_, 1 - rank(), SaysPeerClosed(message)});
  }

  const absl::Duration timeout_;
  const std::string group_;
  const absl::string_view transport_name_;  // "tcp" or "shm"
  std::unique_ptr<PeerTransport> transport_;
  HostCollectives collectives_;
  absl::Mutex mu_;
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> CreateHostCommunicator(
    const CommOptions& options) {
  // Creation as a whole, both rendezvous included, is bounded by the timeout.
  const absl::Time deadline =
      absl::Now() + absl::Milliseconds(options.timeout_ms);
  if (options.host_transport != HostTransport::kTcp) {
    ShmTransport::Options sopts;
    sopts.rank = options.rank;
    sopts.size = options.size;
    sopts.group = options.group;
    sopts.store = options.store;
    sopts.timeout_ms = options.timeout_ms;
    sopts.host_identity = options.host_identity;
    auto shm = ShmTransport::Connect(sopts);
    if (shm.ok()) {
      return std::unique_ptr<Communicator>(
          new HostCommunicator(options, std::move(shm).value(), "shm"));
    }
    // Every rank read the same records, so every rank falls back alike.
    if (options.host_transport == HostTransport::kShm ||
        !absl::IsFailedPrecondition(shm.status())) {
      return shm.status();
    }
  }
  GlooTransport::Options topts;
  topts.rank = options.rank;
  topts.size = options.size;
  topts.group = options.group;
  topts.store = options.store;
  topts.timeout_ms =
      std::max<int64_t>(1, absl::ToInt64Milliseconds(deadline - absl::Now()));
  topts.hostname = options.hostname;
  auto transport = GlooTransport::Connect(topts);
  if (!transport.ok()) return transport.status();
  return std::unique_ptr<Communicator>(
      new HostCommunicator(options, std::move(transport).value(), "tcp"));
}

}  // namespace zshard::comm
