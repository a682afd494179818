// The point-to-point layer under the host collectives: registered memory
// regions that post tagged sends and receives to peers and wait for their
// completions. Backends implement it on their transport (Gloo: pairs and
// unbound buffers; shared memory: rings in per-rank segments); the
// collectives are written once above it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace zshard::comm {

// A region of host memory registered with a transport. Operations posted on
// it run in the background (Gloo), or inside any Wait*() of the same
// transport (shared memory: ranks make progress while they wait in their
// collectives); each Wait*() consumes one completion of that kind. A send
// completes once the peer has taken the message in. Messages between two ranks
// on the same slot match in post order and must have equal sizes. Used by one
// thread at a time; the region must outlive its pending operations' completion
// (or the transport's shutdown).
class TransferRegion {
 public:
  virtual ~TransferRegion() = default;

  // Posts a send of [offset, offset+bytes) to `peer` on `slot`.
  virtual absl::Status PostSend(int peer, uint64_t slot, size_t offset,
                                size_t bytes) = 0;
  // Posts a receive of `bytes` bytes from `peer` on `slot` into
  // [offset, offset+bytes).
  virtual absl::Status PostRecv(int peer, uint64_t slot, size_t offset,
                                size_t bytes) = 0;

  // Blocks until one posted send (receive) completes. DeadlineExceeded at
  // `deadline`, Unavailable when a peer is lost, Aborted after Abort().
  virtual absl::Status WaitSend(absl::Time deadline) = 0;
  virtual absl::Status WaitRecv(absl::Time deadline) = 0;
};

// A connected group of ranks. Thread-compatible except where noted.
// Implementations: GlooTransport (TCP), ShmTransport (shared memory).
class PeerTransport {
 public:
  virtual ~PeerTransport() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Registers [ptr, ptr+bytes) for sends and receives.
  virtual absl::StatusOr<std::unique_ptr<TransferRegion>> Register(
      void* ptr, size_t bytes) = 0;

  // Drops every connection after a failed operation, so that no pending
  // operation touches registered memory any more and peers' operations fail
  // promptly. Later operations fail. Idempotent.
  virtual void Shutdown() = 0;

  // Ends a run whose operations all completed. A completed send may not
  // have reached its peer yet (Gloo's completes once the kernel holds it):
  // a slower peer still receives all of it. Later operations fail. After a
  // Shutdown() or Abort() it does nothing. Idempotent.
  virtual void Close() = 0;

  // Makes every pending and later operation fail with Aborted, wakes every
  // waiter, and tells the peers, whose pending operations then fail
  // promptly (Unavailable). Thread-safe: may run while another thread waits
  // in an operation; never blocks on the network. Idempotent.
  virtual void Abort() = 0;
};

}  // namespace zshard::comm
