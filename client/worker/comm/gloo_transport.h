// PeerTransport on Gloo's TCP transport: a full mesh of pairs built through
// a KvStore rendezvous, unbound buffers as regions, waits with deadlines,
// and an abort that wakes every waiter. Gloo's exceptions stop here: every
// call returns a Status.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "client/worker/comm/kv_store.h"
#include "client/worker/comm/peer_transport.h"
#include "gloo/rendezvous/context.h"
#include "gloo/transport/device.h"
#include "gloo/transport/unbound_buffer.h"

namespace zshard::comm {

// One rank's connections to its group. Register/Shutdown from the thread
// running operations; Abort() from any thread.
class GlooTransport final : public PeerTransport {
 public:
  struct Options {
    int rank = 0;
    int size = 1;
    // Namespaces the rendezvous keys.
    std::string group = "default";
    // Rendezvous store; not owned; may be null when size == 1.
    KvStore* store = nullptr;
    // Bound on the rendezvous and on connection set-up.
    int64_t timeout_ms = 30000;
    // Local address to listen on.
    std::string hostname = "127.0.0.1";
  };

  // Joins the rendezvous and connects to every peer. DeadlineExceeded when
  // a peer does not show up in time, Unavailable when one cannot be reached
  // (a pair that could not connect is named as a FailedPeer payload, as is
  // the peer of a failed operation when Gloo's error names its address),
  // Aborted within ~20 ms once options.store->cancelled() turns true (in the
  // rendezvous or while a pair connects, e.g. to a peer that died after
  // publishing its address).
  // Sets SIGPIPE to be ignored (when it has its default action), because
  // Gloo's socket writes to a lost peer would otherwise kill the process.
  static absl::StatusOr<std::unique_ptr<GlooTransport>> Connect(
      const Options& options);

  ~GlooTransport() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  absl::StatusOr<std::unique_ptr<TransferRegion>> Register(
      void* ptr, size_t bytes) override;
  // Drops the connections at once (a reset: what the kernel still holds
  // for a peer is lost, and the peer's operations fail).
  void Shutdown() override;
  // Closes the connections as TCP closes them: the kernel sends what the
  // completed sends left in the socket buffers, then the end of stream.
  void Close() override;

  // Wakes every waiter with Aborted, fails every later call, and closes the
  // connections. Thread-safe; never waits for an operation in progress
  // (closing takes the pairs' locks and one tick of Gloo's event loop).
  void Abort() override;

 private:
  friend class GlooRegion;

  GlooTransport(const Options& options,
                std::shared_ptr<gloo::transport::Device> device,
                std::vector<std::string> peer_addresses,
                std::shared_ptr<gloo::rendezvous::Context> context);

  // Runs a non-blocking Gloo call, converting its exceptions.
  template <typename Fn>
  absl::Status Call(const char* what, Fn fn);
  // Waits for one send (or receive) completion of `buffer`.
  absl::Status Wait(gloo::transport::UnboundBuffer* buffer, bool send,
                    absl::Time deadline);
  // The status for a Gloo exception with message `message`.
  absl::Status Convert(const char* what, const char* message,
                       absl::Time deadline);

  const int rank_;
  const int size_;
  const std::string group_;
  // Each rank's pair address as Gloo's errors print it.
  const std::vector<std::string> peer_addresses_;
  std::shared_ptr<gloo::transport::Device> device_;
  std::shared_ptr<gloo::rendezvous::Context> context_;

  absl::Mutex mu_;
  bool aborted_ ABSL_GUARDED_BY(mu_) = false;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  // Closed after a clean run: the connections close when the context goes.
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  // Buffers being waited on, with true for a send wait.
  std::vector<std::pair<gloo::transport::UnboundBuffer*, bool>> waiting_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace zshard::comm
