// PeerTransport on POSIX shared memory for ranks that share one host and
// pid namespace: each rank owns a segment holding one inbound ring per
// peer; small messages stream through the rings, large ones are copied once
// by the receiver straight from the sender's memory; progress (copying
// pending sends in, draining rings into posted receives) runs inside every
// Wait. A waiter with nothing to do sleeps on its segment's futex doorbell;
// a lost peer shows as a closed segment or an exited pid (pidfd).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/worker/comm/kv_store.h"
#include "client/worker/comm/peer_transport.h"
#include "client/worker/comm/shm_ring.h"
#include "client/worker/comm/shm_segment.h"

namespace zshard::comm {

class ShmRegion;

// One rank's shared-memory connections to its group. Thread-compatible:
// Register, the regions' calls and Shutdown from one thread at a time;
// Abort() from any thread.
class ShmTransport final : public PeerTransport {
 public:
  struct Options {
    int rank = 0;
    int size = 1;
    // Namespaces the rendezvous keys ("shm/<group>/...").
    std::string group = "default";
    // Rendezvous store; not owned; may be null when size == 1.
    KvStore* store = nullptr;
    // Bound on the rendezvous.
    int64_t timeout_ms = 30000;
    // This rank's host identity; empty: LocalHostIdentity().
    std::string host_identity;
    // Bytes per inbound ring (a power of two); 0: DefaultShmRingCapacity.
    uint64_t ring_capacity = 0;
    // This rank copies large messages (64 KiB and up) straight out of the
    // sender's memory (process_vm_readv: one copy instead of two through
    // the ring) where the kernel allows it, probed per pair at connect;
    // false: they stream through the ring. Default true.
    bool single_copy = true;
  };

  // Creates this rank's segment, joins the rendezvous, maps every peer's
  // segment and, once all have mapped, unlinks its own name (nothing stays
  // in /dev/shm; failures unlink too). FailedPrecondition naming the rank
  // when the ranks do not all share this host and pid namespace (every rank
  // gets it, so all can fall back alike); DeadlineExceeded when a rank does
  // not show up in time; Aborted within ~20 ms once options.store is
  // cancelled; Unavailable when a peer's segment cannot be mapped.
  static absl::StatusOr<std::unique_ptr<ShmTransport>> Connect(
      const Options& options);

  ~ShmTransport() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  absl::StatusOr<std::unique_ptr<TransferRegion>> Register(
      void* ptr, size_t bytes) override;
  void Shutdown() override;
  // As Shutdown(): a peer drains what this rank published before it
  // reports the close.
  void Close() override { Shutdown(); }
  void Abort() override;

 private:
  friend class ShmRegion;

  // A receive posted on a region.
  struct RecvOp {
    ShmRegion* region = nullptr;
    char* dst = nullptr;
    uint64_t bytes = 0;
  };
  // A send posted on a region, streaming into a peer's ring.
  struct SendOp {
    ShmRegion* region = nullptr;
    const char* src = nullptr;
    uint64_t slot = 0;
    uint64_t bytes = 0;
    uint64_t done = 0;
    bool header_sent = false;
  };
  // A message that arrived before its receive was posted.
  struct Unexpected {
    std::vector<char> data;
    bool complete = false;
    bool matched = false;
    RecvOp recv;  // when matched
  };
  // The message being drained from one peer's ring.
  struct Inbound {
    bool active = false;
    char* dst = nullptr;
    uint64_t remaining = 0;
    RecvOp recv;                       // when recv.region != nullptr
    Unexpected* unexpected = nullptr;  // otherwise
  };
  using Key = std::pair<int, uint64_t>;  // (peer, slot)

  ShmTransport(const Options& options, std::unique_ptr<ShmSegment> own);

  absl::Status Check(const char* what) const;
  absl::Status PostSend(ShmRegion* region, int peer, uint64_t slot,
                        const char* src, uint64_t bytes);
  absl::Status PostRecv(ShmRegion* region, int peer, uint64_t slot, char* dst,
                        uint64_t bytes);
  absl::Status Wait(ShmRegion* region, bool send, absl::Time deadline);
  // One pass over every peer; returns whether any byte moved.
  absl::StatusOr<bool> Progress();
  bool PushSends(int peer);
  absl::StatusOr<bool> DrainRing(int peer);
  void CompleteRecv(const RecvOp& recv);
  void CompleteSend(const SendOp& send);
  // Copies a message `peer` left in its own memory into `dst`.
  absl::Status ReadDirect(int peer, char* dst, uint64_t address,
                          uint64_t bytes);
  void FinishInbound(Inbound& in);
  // Unavailable when a peer this rank still exchanges with is lost.
  absl::Status LostPeer();
  bool PeerGone(int peer) const;
  // Called by a region going away with operations outstanding.
  void Orphaned();

  const int rank_;
  const int size_;
  const std::string group_;
  std::unique_ptr<ShmSegment> own_;
  std::vector<std::unique_ptr<ShmSegment>> peers_;  // null at rank_
  std::vector<int> pidfds_;                         // -1: none
  std::vector<int64_t> pids_;
  std::vector<ShmRing> out_;  // this rank -> peer, in the peer's segment
  std::vector<ShmRing> in_;   // peer -> this rank, in own segment
  // single_copy_[p]: p reads large messages straight from this process.
  std::vector<bool> single_copy_;

  std::atomic<bool> aborted_{false};
  std::atomic<bool> shut_down_{false};

  std::vector<std::deque<SendOp>> sends_;  // per peer, in post order
  // Per peer: sends wholly in the ring (bytes or descriptor), until the
  // peer acks that it took them out: a send completes once received.
  std::vector<std::deque<SendOp>> awaiting_ack_;
  std::vector<uint64_t> acks_seen_;
  std::vector<Inbound> inbound_;
  std::map<Key, std::deque<RecvOp>> posted_;
  std::vector<size_t> posted_count_;  // per peer
  std::map<Key, std::deque<std::unique_ptr<Unexpected>>> unexpected_;
};

}  // namespace zshard::comm
