// One rank's POSIX shared-memory segment of the shm transport: a header
// (state flags, a futex doorbell, the owner's pid) followed by one inbound
// byte ring per peer. Also the doorbell's wait and wake calls.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace zshard::comm {

// Control words of one single-producer single-consumer ring; head and tail
// count bytes ever written and read, `acked` the messages the consumer has
// taken out (delivered or parked); each on its own cache line.
struct alignas(64) ShmRingControl {
  std::atomic<uint64_t> head{0};
  char pad0[56];
  std::atomic<uint64_t> tail{0};
  char pad1[56];
  std::atomic<uint64_t> acked{0};
  char pad2[56];
};

// The start of a segment. Every field but the atomics is written once by
// the creator before the segment's name is published.
struct alignas(64) ShmSegmentHeader {
  static constexpr uint64_t kMagic = 0x7a73686172647368;  // "zshardsh"
  static constexpr uint32_t kClosed = 1;
  static constexpr uint32_t kAborted = 2;

  uint64_t magic;
  uint64_t ring_capacity;  // bytes, a power of two
  uint64_t total_bytes;
  int32_t size;
  int32_t rank;
  int32_t owner_pid;
  char pad0[28];
  // kClosed | kAborted bits.
  alignas(64) std::atomic<uint32_t> state{0};
  // Bumped by whoever gives the owner something to do; the owner sleeps on
  // it with FUTEX_WAIT. `sleeping` is nonzero while the owner may sleep.
  alignas(64) std::atomic<uint32_t> doorbell{0};
  std::atomic<uint32_t> sleeping{0};
};

// A mapping of one rank's segment (own or a peer's). Not thread-safe apart
// from the atomics inside; owns the mapping (and, for the creator, the name
// until Unlink()).
class ShmSegment {
 public:
  // Creates, sizes (reserving the pages, so a full /dev/shm fails here and
  // not with SIGBUS later) and maps a new segment `name` (O_EXCL, mode 0600)
  // for rank `rank` of `size` with `ring_capacity` bytes per inbound ring.
  static absl::StatusOr<std::unique_ptr<ShmSegment>> Create(
      const std::string& name, int rank, int size, uint64_t ring_capacity);
  // Maps an existing segment created by rank `rank` of `size`; checks its
  // header.
  static absl::StatusOr<std::unique_ptr<ShmSegment>> Open(
      const std::string& name, int rank, int size);

  ~ShmSegment();
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;

  // Removes the name (idempotent; the mapping stays valid).
  void Unlink();

  ShmSegmentHeader* header() const { return header_; }
  // The ring carrying messages from rank `from` (!= owner) to the owner.
  ShmRingControl* ring_control(int from) const;
  char* ring_data(int from) const;
  uint64_t ring_capacity() const { return header_->ring_capacity; }

  // Bumps the doorbell and wakes the owner if it may be sleeping.
  void Ring() const;
  // Bumps the doorbell and wakes the owner unconditionally.
  void RingAlways() const;

  // Bytes a segment of `size` ranks with `ring_capacity` takes.
  static uint64_t Bytes(int size, uint64_t ring_capacity);

 private:
  ShmSegment(std::string name, void* base, size_t bytes, bool owned);
  // Offset of the ring from rank `from` in a segment owned by `rank`.
  uint64_t RingOffset(int from) const;

  const std::string name_;
  void* const base_;
  const size_t bytes_;
  bool linked_;
  ShmSegmentHeader* const header_;
};

// Sleeps on `word` while it equals `expected`, at most `timeout`. Returns
// early on a wake-up, a signal or a changed value.
void FutexWait(std::atomic<uint32_t>* word, uint32_t expected,
               absl::Duration timeout);

// The per-pair ring capacity for a group of `size` ranks: 1 MiB up to 5
// ranks, shrinking so that a segment stays near 4 MiB, never below 64 KiB.
uint64_t DefaultShmRingCapacity(int size);

}  // namespace zshard::comm
