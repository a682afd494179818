// GlooCommunicator: deadlines, sticky failure and abort around the host
// collectives on a GlooTransport.
#include "client/worker/comm/gloo_communicator.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/worker/comm/gloo_transport.h"
#include "client/worker/comm/host_collectives.h"

namespace zshard::comm {
namespace {

// Thread safety as Communicator's: operations from one thread at a time
// (enforced by the base class); Abort() from any thread.
class GlooCommunicator final : public Communicator {
 public:
  GlooCommunicator(const CommOptions& options,
                   std::unique_ptr<GlooTransport> transport)
      : Communicator(options.rank, options.size),
        timeout_(absl::Milliseconds(options.timeout_ms)),
        transport_(std::move(transport)),
        collectives_(transport_.get(),
                     HostCollectives::Options{options.chunk_bytes,
                                              options.pipeline_depth,
                                              options.gloo_ring}) {}

  ~GlooCommunicator() override {
    // Connections close before the scratch they may write into goes away.
    transport_->Shutdown();
  }

  absl::string_view backend() const override { return "gloo"; }

 private:
  // Runs one operation with a fresh deadline; the first failure breaks the
  // communicator for good.
  template <typename Fn>
  absl::Status Guard(Fn fn) {
    {
      absl::MutexLock lock(&mu_);
      if (!failure_.ok()) {
        return absl::Status(
            failure_.code(),
            absl::StrCat("communicator failed earlier: ", failure_.message()));
      }
    }
    absl::Status s = fn(absl::Now() + timeout_);
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

  const absl::Duration timeout_;
  std::unique_ptr<GlooTransport> transport_;
  HostCollectives collectives_;
  absl::Mutex mu_;
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> CreateGlooCommunicator(
    const CommOptions& options) {
  GlooTransport::Options topts;
  topts.rank = options.rank;
  topts.size = options.size;
  topts.group = options.group;
  topts.store = options.store;
  topts.timeout_ms = options.timeout_ms;
  topts.hostname = options.hostname;
  auto transport = GlooTransport::Connect(topts);
  if (!transport.ok()) return transport.status();
  return std::unique_ptr<Communicator>(
      new GlooCommunicator(options, std::move(transport).value()));
}

}  // namespace zshard::comm
