// The progress engine of ShmTransport: pending sends copied (or described)
// into peers' rings, inbound rings drained into posted receives or parked
// on the heap, and single copies straight from a peer's memory.
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "client/worker/comm/failed_peer.h"
#include "client/worker/comm/shm_region.h"
#include "client/worker/comm/shm_transport.h"

namespace zshard::comm {
namespace {

// A message in a ring: this header, then `bytes` payload bytes; or, with a
// nonzero `address`, only the header: the payload stays at `address` in the
// sender's process until the receiver has copied it and acked.
struct FrameHeader {
  uint64_t slot;
  uint64_t bytes;
  uint64_t address;
};
constexpr uint64_t kFrameBytes = sizeof(FrameHeader);
// Messages from this size on are copied once, straight from the sender's
// memory, where the pair allows it.
constexpr uint64_t kSingleCopyMin = uint64_t{64} << 10;

// Bytes copied before publishing, so the reader can start on the first
// part while the rest is copied.
constexpr uint64_t kPublishGrain = uint64_t{256} << 10;

}  // namespace

void ShmTransport::CompleteRecv(const RecvOp& recv) {
  ++recv.region->recvs_done_;
  --recv.region->outstanding_;
}

void ShmTransport::CompleteSend(const SendOp& send) {
  ++send.region->sends_done_;
  --send.region->outstanding_;
}

bool ShmTransport::PushSends(int peer) {
  std::deque<SendOp>& queue = sends_[peer];
  ShmRing& ring = out_[peer];
  bool moved = false;
  for (const uint64_t acked = ring.Acked(); acks_seen_[peer] < acked;
       ++acks_seen_[peer]) {
    CompleteSend(awaiting_ack_[peer].front());
    awaiting_ack_[peer].pop_front();
    moved = true;
  }
  while (!queue.empty()) {
    SendOp& op = queue.front();
    uint64_t free = ring.Free();
    if (!op.header_sent) {
      if (free < kFrameBytes) break;
      const bool direct = single_copy_[peer] && op.bytes >= kSingleCopyMin;
      const FrameHeader header{
          op.slot, op.bytes,
          direct ? static_cast<uint64_t>(reinterpret_cast<uintptr_t>(op.src))
                 : 0};
      ring.Write(&header, kFrameBytes);
      free -= kFrameBytes;
      op.header_sent = true;
      moved = true;
      if (direct) {
        awaiting_ack_[peer].push_back(op);
        queue.pop_front();
        continue;
      }
    }
    while (op.done < op.bytes && free > 0) {
      const uint64_t n = std::min({free, op.bytes - op.done, kPublishGrain});
      ring.Write(op.src + op.done, n);
      op.done += n;
      free -= n;
      ring.Publish();
      peers_[peer]->Ring();
      moved = true;
    }
    if (op.done < op.bytes) break;
    awaiting_ack_[peer].push_back(op);
    queue.pop_front();
  }
  if (moved) {
    ring.Publish();
    peers_[peer]->Ring();
  }
  return moved;
}

void ShmTransport::FinishInbound(Inbound& in) {
  in.active = false;
  if (in.recv.region != nullptr) {
    CompleteRecv(in.recv);
    return;
  }
  Unexpected* u = in.unexpected;
  u->complete = true;
  if (!u->matched) return;
  if (!u->data.empty())
    std::memcpy(u->recv.dst, u->data.data(), u->data.size());
  CompleteRecv(u->recv);
  for (auto it = unexpected_.begin(); it != unexpected_.end(); ++it) {
    auto& queue = it->second;
    auto entry = std::find_if(queue.begin(), queue.end(),
                              [u](const auto& e) { return e.get() == u; });
    if (entry == queue.end()) continue;
    queue.erase(entry);
    if (queue.empty()) unexpected_.erase(it);
    return;
  }
}

absl::StatusOr<bool> ShmTransport::DrainRing(int peer) {
  ShmRing& ring = in_[peer];
  Inbound& in = inbound_[peer];
  bool moved = false;
  while (true) {
    uint64_t available = ring.Available();
    if (!in.active) {
      if (available < kFrameBytes) break;
      FrameHeader header;
      ring.Peek(&header, kFrameBytes);
      const Key key(peer, header.slot);
      auto it = posted_.find(key);
      in = Inbound();
      if (it != posted_.end()) {
        in.recv = it->second.front();
        it->second.pop_front();
        if (it->second.empty()) posted_.erase(it);
        --posted_count_[peer];
        if (in.recv.bytes != header.bytes) {
          return absl::InternalError(absl::StrCat(
              "shm recv from rank ", peer, " on slot ", header.slot, ": ",
              in.recv.bytes, " bytes posted, ", header.bytes, " sent"));
        }
        in.dst = in.recv.dst;
      } else if (posted_count_[peer] > 0) {
        // A receive waits behind this message: park it on the heap.
        auto u = std::make_unique<Unexpected>();
        u->data.resize(header.bytes);
        in.unexpected = u.get();
        in.dst = u->data.data();
        unexpected_[key].push_back(std::move(u));
      } else {
        break;  // leave it in the ring until its receive is posted
      }
      ring.Read(&header, kFrameBytes);
      available -= kFrameBytes;
      in.active = true;
      in.remaining = header.bytes;
      moved = true;
      if (header.address != 0) {
        absl::Status s = ReadDirect(peer, in.dst, header.address, header.bytes);
        if (!s.ok()) return s;
        in.remaining = 0;
      }
    }
    while (in.remaining > 0 && available > 0) {
      const uint64_t n = std::min({available, in.remaining, kPublishGrain});
      ring.Read(in.dst, n);
      in.dst += n;
      in.remaining -= n;
      available -= n;
      ring.Release();
      peers_[peer]->Ring();
      moved = true;
    }
    if (in.remaining > 0) break;
    FinishInbound(in);
    // The sender's send completes now, not when its bytes entered the ring.
    ring.Ack();
  }
  if (moved) {
    ring.Release();
    peers_[peer]->Ring();
  }
  return moved;
}

absl::Status ShmTransport::ReadDirect(int peer, char* dst, uint64_t address,
                                      uint64_t bytes) {
  while (bytes > 0) {
    struct iovec local = {dst, bytes};
    struct iovec remote = {reinterpret_cast<void*>(address), bytes};
    const ssize_t n = process_vm_readv(static_cast<pid_t>(pids_[peer]), &local,
                                       1, &remote, 1, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EFAULT;
      // Its memory went with its connections (it exited or shut down).
      return WithFailedPeer(
          absl::UnavailableError(absl::StrCat(
              "shm recv from rank ", peer,
              ": reading its memory failed: ", std::strerror(err))),
          FailedPeer{group_, peer, true});
    }
    dst += n;
    address += static_cast<uint64_t>(n);
    bytes -= static_cast<uint64_t>(n);
  }
  // A sender gives its memory back only after closing its segment: if it
  // is closed now, what was read may be stale.
  if ((peers_[peer]->header()->state.load() & ShmSegmentHeader::kClosed) != 0) {
    return WithFailedPeer(
        absl::UnavailableError(absl::StrCat(
            "shm transport of group '", group_, "': peer lost: rank ", peer,
            " closed while its message was read")),
        FailedPeer{group_, peer, true});
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> ShmTransport::Progress() {
  bool moved = false;
  for (int i = 1; i < size_; ++i) {
    const int peer = (rank_ + i) % size_;
    moved |= PushSends(peer);
    absl::StatusOr<bool> drained = DrainRing(peer);
    if (!drained.ok()) return drained.status();
    moved |= *drained;
  }
  return moved;
}

}  // namespace zshard::comm
