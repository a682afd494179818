// ShmTransport: regions, posting, shutdown, abort and the waits. Connect()
// is in shm_connect.cc, the progress engine in shm_progress.cc.
#include "client/worker/comm/shm_transport.h"

#include <poll.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/worker/comm/failed_peer.h"
#include "client/worker/comm/shm_region.h"
#include "common/file_io.h"

namespace zshard::comm {
namespace {

// Longest sleep on the doorbell between checks of deadlines and peers.
constexpr absl::Duration kSleepStep = absl::Milliseconds(20);
// Passes without progress spent yielding before sleeping.
constexpr int kYieldPasses = 4;

}  // namespace

ShmTransport::ShmTransport(const Options& options,
                           std::unique_ptr<ShmSegment> own)
    : rank_(options.rank),
      size_(options.size),
      group_(options.group),
      own_(std::move(own)),
      peers_(options.size),
      pidfds_(options.size, -1),
      pids_(options.size, 0),
      out_(options.size),
      in_(options.size),
      single_copy_(options.size, false),
      sends_(options.size),
      awaiting_ack_(options.size),
      acks_seen_(options.size, 0),
      inbound_(options.size),
      posted_count_(options.size, 0) {}

ShmTransport::~ShmTransport() {
  Shutdown();
  for (int fd : pidfds_) {
    if (fd >= 0) close(fd);
  }
}

absl::StatusOr<std::unique_ptr<TransferRegion>> ShmTransport::Register(
    void* ptr, size_t bytes) {
  absl::Status s = Check("register");
  if (!s.ok()) return s;
  return std::unique_ptr<TransferRegion>(
      new ShmRegion(this, static_cast<char*>(ptr), bytes));
}

void ShmTransport::Shutdown() {
  if (shut_down_.exchange(true)) return;
  own_->header()->state.fetch_or(ShmSegmentHeader::kClosed);
  for (const auto& peer : peers_) {
    if (peer != nullptr) peer->RingAlways();
  }
}

void ShmTransport::Abort() {
  aborted_.store(true);
  own_->header()->state.fetch_or(ShmSegmentHeader::kAborted |
                                 ShmSegmentHeader::kClosed);
  own_->RingAlways();
  for (const auto& peer : peers_) {
    if (peer != nullptr) peer->RingAlways();
  }
  shut_down_.store(true);
}

void ShmTransport::Orphaned() {
  // Queued operations point into the region's memory: nothing may run them
  // any more.
  Shutdown();
}

absl::Status ShmTransport::Check(const char* what) const {
  if (aborted_.load()) {
    return absl::AbortedError(absl::StrCat("shm ", what, ": aborted"));
  }
  if (shut_down_.load()) {
    return absl::UnavailableError(absl::StrCat(
        "shm ", what, ": connections closed after an earlier failure"));
  }
  return absl::OkStatus();
}

absl::Status ShmTransport::PostSend(ShmRegion* region, int peer, uint64_t slot,
                                    const char* src, uint64_t bytes) {
  absl::Status s = Check("send");
  if (!s.ok()) return s;
  SendOp op;
  op.region = region;
  op.src = src;
  op.slot = slot;
  op.bytes = bytes;
  sends_[peer].push_back(op);
  ++region->outstanding_;
  return absl::OkStatus();
}

absl::Status ShmTransport::PostRecv(ShmRegion* region, int peer, uint64_t slot,
                                    char* dst, uint64_t bytes) {
  absl::Status s = Check("recv");
  if (!s.ok()) return s;
  RecvOp recv{region, dst, bytes};
  ++region->outstanding_;
  auto it = unexpected_.find(Key(peer, slot));
  if (it != unexpected_.end()) {
    auto& queue = it->second;
    for (auto entry = queue.begin(); entry != queue.end(); ++entry) {
      Unexpected& u = **entry;
      if (u.matched) continue;
      if (u.data.size() != bytes) {
        return absl::InternalError(
            absl::StrCat("shm recv from rank ", peer, " on slot ", slot, ": ",
                         bytes, " bytes posted, ", u.data.size(), " sent"));
      }
      if (!u.complete) {
        u.matched = true;
        u.recv = recv;
        return absl::OkStatus();
      }
      if (bytes > 0) std::memcpy(dst, u.data.data(), bytes);
      queue.erase(entry);
      if (queue.empty()) unexpected_.erase(it);
      CompleteRecv(recv);
      return absl::OkStatus();
    }
  }
  posted_[Key(peer, slot)].push_back(recv);
  ++posted_count_[peer];
  return absl::OkStatus();
}

bool ShmTransport::PeerGone(int peer) const {
  const uint32_t state =
      peers_[peer]->header()->state.load(std::memory_order_acquire);
  if ((state & ShmSegmentHeader::kClosed) != 0) return true;
  if (pidfds_[peer] >= 0) {
    struct pollfd pfd = {pidfds_[peer], POLLIN, 0};
    return poll(&pfd, 1, 0) > 0;
  }
  if (pids_[peer] == getpid()) return false;
  // No pidfd: a missing process, or a zombie, has exited.
  absl::StatusOr<std::string> stat =
      ReadFile(absl::StrCat("/proc/", pids_[peer], "/stat"));
  return !stat.ok() || stat->find(") Z") != std::string::npos ||
         stat->find(") X") != std::string::npos;
}

absl::Status ShmTransport::LostPeer() {
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    const bool busy = !sends_[peer].empty() || !awaiting_ack_[peer].empty() ||
                      posted_count_[peer] > 0 || inbound_[peer].active;
    if (!busy || !PeerGone(peer)) continue;
    const uint32_t state = peers_[peer]->header()->state.load();
    return WithFailedPeer(
        absl::UnavailableError(absl::StrCat(
            "shm transport of group '", group_, "': peer lost: rank ", peer,
            (state & ShmSegmentHeader::kAborted) != 0 ? " aborted"
            : (state & ShmSegmentHeader::kClosed) != 0
                ? " closed its connections"
                : " exited")),
        FailedPeer{group_, peer, true});
  }
  return absl::OkStatus();
}

absl::Status ShmTransport::Wait(ShmRegion* region, bool send,
                                absl::Time deadline) {
  const char* what = send ? "wait for send" : "wait for recv";
  uint64_t& done = send ? region->sends_done_ : region->recvs_done_;
  ShmSegmentHeader* own = own_->header();
  int idle_passes = 0;
  while (true) {
    absl::Status s = Check(what);
    if (!s.ok()) return s;
    if (done > 0) {
      --done;
      return absl::OkStatus();
    }
    const uint32_t seq = own->doorbell.load();
    absl::StatusOr<bool> moved = Progress();
    if (!moved.ok()) return moved.status();
    if (*moved || done > 0) {
      idle_passes = 0;
      continue;
    }
    if (++idle_passes <= kYieldPasses) {
      sched_yield();
      continue;
    }
    s = LostPeer();
    if (!s.ok()) {
      // A peer publishes its last bytes before it closes: drain once more.
      moved = Progress();
      if (!moved.ok()) return moved.status();
      if (*moved || done > 0) continue;
      return s;
    }
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(
          absl::StrCat("shm ", what, ": timed out"));
    }
    own->sleeping.store(1);
    if (own->doorbell.load() == seq) {
      FutexWait(&own->doorbell, seq, std::min(left, kSleepStep));
    }
    own->sleeping.store(0);
  }
}

}  // namespace zshard::comm
