// GlooTransport: Gloo's TCP pairs and unbound buffers behind PeerTransport.
#include "client/worker/comm/gloo_transport.h"

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <functional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/worker/comm/failed_peer.h"
#include "client/worker/comm/gloo_mesh.h"
#include "client/worker/comm/gloo_store.h"
#include "client/worker/comm/memory_kv_store.h"
#include "gloo/common/error.h"
#include "gloo/common/logging.h"
#include "gloo/transport/tcp/device.h"

namespace zshard::comm {

// A registered region: one Gloo unbound buffer.
class GlooRegion final : public TransferRegion {
 public:
  GlooRegion(GlooTransport* transport,
             std::unique_ptr<gloo::transport::UnboundBuffer> buffer)
      : transport_(transport), buffer_(std::move(buffer)) {}

  absl::Status PostSend(int peer, uint64_t slot, size_t offset,
                        size_t bytes) override {
    return transport_->Call("send",
                            [&] { buffer_->send(peer, slot, offset, bytes); });
  }
  absl::Status PostRecv(int peer, uint64_t slot, size_t offset,
                        size_t bytes) override {
    return transport_->Call("recv",
                            [&] { buffer_->recv(peer, slot, offset, bytes); });
  }
  absl::Status WaitSend(absl::Time deadline) override {
    return transport_->Wait(buffer_.get(), true, deadline);
  }
  absl::Status WaitRecv(absl::Time deadline) override {
    return transport_->Wait(buffer_.get(), false, deadline);
  }

 private:
  GlooTransport* const transport_;
  std::unique_ptr<gloo::transport::UnboundBuffer> buffer_;
};

namespace {

// Gloo writes to its sockets without MSG_NOSIGNAL: a peer that closes its end
// would kill the whole process with SIGPIPE instead of failing one write with
// EPIPE. Ignore the signal unless the process chose its own handler.
void IgnoreSigpipe() {
  struct sigaction current;
  if (sigaction(SIGPIPE, nullptr, &current) == 0 &&
      current.sa_handler == SIG_DFL) {
    signal(SIGPIPE, SIG_IGN);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<GlooTransport>> GlooTransport::Connect(
    const Options& options) {
  IgnoreSigpipe();
  MemoryKvStore local;  // a group of one needs no shared store
  KvStore* kv = options.store != nullptr ? options.store : &local;
  GlooKvStore store(kv, options.group, options.timeout_ms);
  int failed_peer = -1;
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = options.hostname;
    std::shared_ptr<gloo::transport::Device> device =
        gloo::transport::tcp::CreateDevice(attr);
    auto context = std::make_shared<MeshContext>(options.rank, options.size);
    context->setTimeout(std::chrono::milliseconds(options.timeout_ms));
    std::function<bool()> cancelled;
    if (options.store != nullptr) {
      cancelled = [kv] { return kv->cancelled(); };
    }
    if (!ConnectMesh(store, device, *context, cancelled, &failed_peer)) {
      return absl::AbortedError(absl::StrCat("gloo rendezvous of group '",
                                             options.group, "': cancelled"));
    }
    return std::unique_ptr<GlooTransport>(new GlooTransport(
        options, std::move(device), context->peer_addresses, context));
  } catch (const std::exception& e) {
    absl::Status first = store.first_error();
    if (!first.ok()) return first;
    const std::string what = e.what();
    const FailedPeer peer{options.group, failed_peer, SaysPeerClosed(what)};
    if (absl::StrContains(what, "imeout") ||
        absl::StrContains(what, "imed out")) {
      return WithFailedPeer(absl::DeadlineExceededError(absl::StrCat(
                                "gloo rendezvous of group '", options.group,
                                "' timed out: ", what)),
                            peer);
    }
    return WithFailedPeer(
        absl::UnavailableError(absl::StrCat("gloo rendezvous of group '",
                                            options.group, "' failed: ", what)),
        peer);
  }
}

GlooTransport::GlooTransport(const Options& options,
                             std::shared_ptr<gloo::transport::Device> device,
                             std::vector<std::string> peer_addresses,
                             std::shared_ptr<gloo::rendezvous::Context> context)
    : rank_(options.rank),
      size_(options.size),
      group_(options.group),
      peer_addresses_(std::move(peer_addresses)),
      device_(std::move(device)),
      context_(std::move(context)) {}

GlooTransport::~GlooTransport() {
  {
    absl::MutexLock lock(&mu_);
    if (closed_) {
      // Releasing the context destroys its pairs, and a pair's destructor
      // closes its socket without Shutdown's SO_LINGER reset.
      return;
    }
  }
  Shutdown();
}

absl::StatusOr<std::unique_ptr<TransferRegion>> GlooTransport::Register(
    void* ptr, size_t bytes) {
  std::unique_ptr<gloo::transport::UnboundBuffer> buffer;
  absl::Status s = Call(
      "register", [&] { buffer = context_->createUnboundBuffer(ptr, bytes); });
  if (!s.ok()) return s;
  return std::unique_ptr<TransferRegion>(
      new GlooRegion(this, std::move(buffer)));
}

void GlooTransport::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return;
    shut_down_ = true;
  }
  // Outside mu_: closing a pair waits for Gloo's event loop, and waiters
  // that wake up take mu_ on their way out.
  try {
    context_->closeConnections();
  } catch (const std::exception&) {
    // Closing a pair that already failed may throw; it is closed either way.
  }
}

void GlooTransport::Close() {
  absl::MutexLock lock(&mu_);
  if (shut_down_) return;
  shut_down_ = true;
  closed_ = true;
}

void GlooTransport::Abort() {
  {
    absl::MutexLock lock(&mu_);
    aborted_ = true;
    for (const auto& [buffer, send] : waiting_) {
      if (send) {
        buffer->abortWaitSend();
      } else {
        buffer->abortWaitRecv();
      }
    }
  }
  Shutdown();
}

absl::Status GlooTransport::Convert(const char* what, const char* message,
                                    absl::Time deadline) {
  bool aborted;
  bool shut_down;
  {
    absl::MutexLock lock(&mu_);
    aborted = aborted_;
    shut_down = shut_down_;
  }
  if (aborted) {
    return absl::AbortedError(absl::StrCat("gloo ", what, ": aborted"));
  }
  if (absl::Now() >= deadline || absl::StrContains(message, "Timed out")) {
    return absl::DeadlineExceededError(
        absl::StrCat("gloo ", what, ": timed out: ", message));
  }
  if (shut_down) {
    return absl::UnavailableError(absl::StrCat(
        "gloo ", what, ": connections closed after an earlier failure"));
  }
  const std::string text(message);
  return WithFailedPeer(absl::UnavailableError(absl::StrCat(
                            "gloo ", what, ": peer lost: ", message)),
                        FailedPeer{group_, PeerNamedBy(peer_addresses_, text),
                                   SaysPeerClosed(text)});
}

template <typename Fn>
absl::Status GlooTransport::Call(const char* what, Fn fn) {
  {
    absl::MutexLock lock(&mu_);
    if (aborted_) {
      return absl::AbortedError(absl::StrCat("gloo ", what, ": aborted"));
    }
    if (closed_) {
      return absl::FailedPreconditionError(
          absl::StrCat("gloo ", what, ": the transport is closed"));
    }
  }
  try {
    fn();
  } catch (const gloo::EnforceNotMet& e) {
    return Convert(what, e.what(), absl::InfiniteFuture());
  } catch (const std::exception& e) {
    return Convert(what, e.what(), absl::InfiniteFuture());
  }
  return absl::OkStatus();
}

absl::Status GlooTransport::Wait(gloo::transport::UnboundBuffer* buffer,
                                 bool send, absl::Time deadline) {
  const char* what = send ? "wait for send" : "wait for recv";
  {
    absl::MutexLock lock(&mu_);
    if (aborted_) {
      return absl::AbortedError(absl::StrCat("gloo ", what, ": aborted"));
    }
    waiting_.emplace_back(buffer, send);
  }
  const int64_t remaining_ms = absl::ToInt64Milliseconds(
      absl::Ceil(deadline - absl::Now(), absl::Milliseconds(1)));
  bool completed = false;
  absl::Status status;
  if (remaining_ms <= 0) {
    status =
        absl::DeadlineExceededError(absl::StrCat("gloo ", what, ": timed out"));
  } else {
    try {
      const auto timeout = std::chrono::milliseconds(remaining_ms);
      completed = send ? buffer->waitSend(timeout) : buffer->waitRecv(timeout);
      if (!completed) {
        status = absl::AbortedError(absl::StrCat("gloo ", what, ": aborted"));
      }
    } catch (const gloo::EnforceNotMet& e) {
      status = Convert(what, e.what(), deadline);
    } catch (const std::exception& e) {
      status = Convert(what, e.what(), deadline);
    }
  }
  absl::MutexLock lock(&mu_);
  waiting_.erase(std::find(waiting_.begin(), waiting_.end(),
                           std::make_pair(buffer, send)));
  return status;
}

}  // namespace zshard::comm
