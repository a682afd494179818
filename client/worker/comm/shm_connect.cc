// ShmTransport::Connect: the segment, the rendezvous, the peers' mappings
// and pidfds, and the unlink once every rank has mapped (or, on failure, of
// the own segment and those of peers that died meanwhile).
#include <poll.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/worker/comm/failed_peer.h"
#include "client/worker/comm/shm_names.h"
#include "client/worker/comm/shm_rendezvous.h"
#include "client/worker/comm/shm_transport.h"
#include "common/status.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

namespace zshard::comm {
namespace {

// Whether this process may read `record`'s memory with process_vm_readv
// (same user, and no seccomp or ptrace policy against it).
bool CanRead(const ShmPeerRecord& record) {
  uint64_t magic = 0;
  struct iovec local = {&magic, sizeof(magic)};
  struct iovec remote = {reinterpret_cast<void*>(record.probe_address),
                         sizeof(magic)};
  return process_vm_readv(static_cast<pid_t>(record.pid), &local, 1, &remote, 1,
                          0) == sizeof(magic) &&
         magic == ShmSegmentHeader::kMagic;
}

// A pidfd of process `pid` (-1 without pidfds: old kernel, seccomp) and
// whether the process has exited (a zombie counts; false when that cannot
// be told).
struct PidWatch {
  int fd;
  bool exited;
};

PidWatch WatchPid(int64_t pid) {
  const long fd = syscall(SYS_pidfd_open, static_cast<pid_t>(pid), 0);
  if (fd < 0) return {-1, errno == ESRCH};
  struct pollfd pfd = {static_cast<int>(fd), POLLIN, 0};
  return {static_cast<int>(fd), poll(&pfd, 1, 0) > 0};
}

bool Exited(int64_t pid) {
  const PidWatch watch = WatchPid(pid);
  if (watch.fd >= 0) close(watch.fd);
  return watch.exited;
}

// Removes the names of peers that died during the rendezvous: they can no
// longer unlink their own segments.
void UnlinkExitedPeers(const std::vector<ShmPeerRecord>& records, int rank) {
  for (size_t r = 0; r < records.size(); ++r) {
    if (static_cast<int>(r) == rank || records[r].segment.empty() ||
        records[r].pid == getpid() || !Exited(records[r].pid)) {
      continue;
    }
    shm_unlink(records[r].segment.c_str());
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<ShmTransport>> ShmTransport::Connect(
    const Options& options) {
  const uint64_t capacity = options.ring_capacity != 0
                                ? options.ring_capacity
                                : DefaultShmRingCapacity(options.size);
  ShmPeerRecord mine;
  mine.identity = options.host_identity.empty() ? LocalHostIdentity()
                                                : options.host_identity;
  mine.pid = getpid();
  // Segments of processes killed mid-rendezvous (their peers could not
  // unlink them either) go before this one is made.
  RemoveStaleShmSegments();
  const std::string name = ShmSegmentName(options.group);
  absl::StatusOr<std::unique_ptr<ShmSegment>> own =
      ShmSegment::Create(name, options.rank, options.size, capacity);
  if (own.ok()) {
    mine.segment = name;
    mine.probe_address = static_cast<uint64_t>(
        reinterpret_cast<uintptr_t>(&(*own)->header()->magic));
  }
  if (options.size == 1) {
    if (!own.ok()) return own.status();
    (*own)->Unlink();
    return std::unique_ptr<ShmTransport>(
        new ShmTransport(options, std::move(own).value()));
  }
  if (options.store == nullptr) {
    return absl::InvalidArgumentError(
        "shm transport of more than one rank needs a rendezvous store");
  }
  const absl::Time deadline =
      absl::Now() + absl::Milliseconds(options.timeout_ms);
  ShmRendezvous rendezvous(options.store, options.group, options.rank,
                           options.size, deadline);
  // Published even without a segment, so that every rank learns why.
  absl::StatusOr<std::vector<ShmPeerRecord>> records =
      rendezvous.Exchange(mine);
  if (!records.ok()) return records.status();
  absl::Status colocated = CheckColocated(*records, options.group);
  if (!colocated.ok()) {
    if (!own.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat(colocated.message(), ": ", own.status().message()));
    }
    return colocated;
  }
  auto fail = [&](absl::Status status) {
    UnlinkExitedPeers(*records, options.rank);
    return status;
  };
  auto transport = std::unique_ptr<ShmTransport>(
      new ShmTransport(options, std::move(own).value()));
  ShmTransport& t = *transport;
  for (int peer = 0; peer < options.size; ++peer) {
    if (peer == options.rank) continue;
    const ShmPeerRecord& record = (*records)[peer];
    absl::StatusOr<std::unique_ptr<ShmSegment>> segment =
        ShmSegment::Open(record.segment, peer, options.size);
    if (!segment.ok()) {
      return fail(absl::UnavailableError(absl::StrCat(
          "shm transport of group '", options.group, "': mapping rank ", peer,
          "'s segment: ", segment.status().message())));
    }
    t.peers_[peer] = std::move(segment).value();
    t.pids_[peer] = record.pid;
    if (record.pid != getpid()) {
      const PidWatch watch = WatchPid(record.pid);
      if (watch.exited) {
        if (watch.fd >= 0) close(watch.fd);
        return fail(WithFailedPeer(
            absl::UnavailableError(absl::StrCat(
                "shm transport of group '", options.group, "': rank ", peer,
                " (pid ", record.pid, ") has exited")),
            FailedPeer{options.group, peer, true}));
      }
      // Without pidfds PeerGone reads /proc instead.
      t.pidfds_[peer] = watch.fd;
    }
    t.out_[peer] = ShmRing(t.peers_[peer]->ring_control(options.rank),
                           t.peers_[peer]->ring_data(options.rank),
                           t.peers_[peer]->ring_capacity());
    t.in_[peer] = ShmRing(t.own_->ring_control(peer), t.own_->ring_data(peer),
                          t.own_->ring_capacity());
  }
  // Which peers this rank can read straight from, as '0'/'1' per rank.
  std::string readable(static_cast<size_t>(options.size), '0');
  for (int peer = 0; peer < options.size && options.single_copy; ++peer) {
    if (peer != options.rank && CanRead((*records)[peer])) readable[peer] = '1';
  }
  absl::StatusOr<std::vector<std::string>> mapped =
      rendezvous.AllGather("mapped", readable);
  if (!mapped.ok()) return fail(mapped.status());
  t.own_->Unlink();
  for (int peer = 0; peer < options.size; ++peer) {
    const std::string& theirs = (*mapped)[peer];
    t.single_copy_[peer] = peer != options.rank &&
                           theirs.size() == readable.size() &&
                           theirs[options.rank] == '1';
  }
  return transport;
}

}  // namespace zshard::comm
