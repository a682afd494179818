// ShmSegment: shm_open, reservation, mapping and the futex doorbell.
#include "client/worker/comm/shm_segment.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <new>
#include <utility>

#include "absl/strings/str_cat.h"

namespace zshard::comm {
namespace {

constexpr uint64_t kHeaderBytes = 4096;
constexpr uint64_t kRingControlBytes = sizeof(ShmRingControl);
static_assert(sizeof(ShmSegmentHeader) <= kHeaderBytes);
static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(std::atomic<uint32_t>::is_always_lock_free);

absl::Status Errno(const char* what, const std::string& name, int err) {
  const std::string message = absl::StrCat("shm segment '", name, "': ", what,
                                           " failed: ", std::strerror(err));
  if (err == ENOSPC || err == ENOMEM) {
    return absl::ResourceExhaustedError(message);
  }
  if (err == ENOENT) return absl::NotFoundError(message);
  return absl::UnavailableError(message);
}

void Futex(std::atomic<uint32_t>* word, int op, uint32_t value,
           const struct timespec* timeout) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, value, timeout,
          nullptr, 0);
}

}  // namespace

uint64_t ShmSegment::Bytes(int size, uint64_t ring_capacity) {
  const uint64_t rings = static_cast<uint64_t>(std::max(0, size - 1));
  return kHeaderBytes + rings * (kRingControlBytes + ring_capacity);
}

uint64_t DefaultShmRingCapacity(int size) {
  constexpr uint64_t kMax = uint64_t{1} << 20;
  constexpr uint64_t kMin = uint64_t{64} << 10;
  constexpr uint64_t kSegmentBudget = uint64_t{4} << 20;
  const uint64_t peers = static_cast<uint64_t>(std::max(1, size - 1));
  uint64_t capacity = kMax;
  while (capacity > kMin && capacity * peers > kSegmentBudget + kMax / 2) {
    capacity /= 2;
  }
  return capacity;
}

ShmSegment::ShmSegment(std::string name, void* base, size_t bytes, bool owned)
    : name_(std::move(name)),
      base_(base),
      bytes_(bytes),
      linked_(owned),
      header_(static_cast<ShmSegmentHeader*>(base)) {}

ShmSegment::~ShmSegment() {
  Unlink();
  munmap(base_, bytes_);
}

absl::StatusOr<std::unique_ptr<ShmSegment>> ShmSegment::Create(
    const std::string& name, int rank, int size, uint64_t ring_capacity) {
  if (ring_capacity == 0 || (ring_capacity & (ring_capacity - 1)) != 0 ||
      ring_capacity % 64 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shm ring capacity ", ring_capacity, " is not a power of two >= 64"));
  }
  const uint64_t bytes = Bytes(size, ring_capacity);
  const int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) return Errno("shm_open", name, errno);
  auto fail = [&](const char* what, int err) {
    close(fd);
    shm_unlink(name.c_str());
    return Errno(what, name, err);
  };
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    return fail("ftruncate", errno);
  }
  const int err = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (err != 0 && err != EOPNOTSUPP && err != EINVAL) {
    return fail("reserving pages", err);
  }
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) return fail("mmap", errno);
  close(fd);
  auto* header = new (base) ShmSegmentHeader();
  header->magic = ShmSegmentHeader::kMagic;
  header->ring_capacity = ring_capacity;
  header->total_bytes = bytes;
  header->size = size;
  header->rank = rank;
  header->owner_pid = static_cast<int32_t>(getpid());
  auto segment = std::unique_ptr<ShmSegment>(
      new ShmSegment(name, base, static_cast<size_t>(bytes), true));
  for (int from = 0; from < size; ++from) {
    if (from != rank) new (segment->ring_control(from)) ShmRingControl();
  }
  std::atomic_thread_fence(std::memory_order_release);
  return segment;
}

absl::StatusOr<std::unique_ptr<ShmSegment>> ShmSegment::Open(
    const std::string& name, int rank, int size) {
  const int fd = shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) return Errno("shm_open", name, errno);
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    close(fd);
    return Errno("fstat", name, err);
  }
  const size_t bytes = static_cast<size_t>(st.st_size);
  if (bytes < kHeaderBytes) {
    close(fd);
    return absl::FailedPreconditionError(absl::StrCat(
        "shm segment '", name, "' has ", bytes, " bytes, too few"));
  }
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int err = errno;
  close(fd);
  if (base == MAP_FAILED) return Errno("mmap", name, err);
  auto segment =
      std::unique_ptr<ShmSegment>(new ShmSegment(name, base, bytes, false));
  std::atomic_thread_fence(std::memory_order_acquire);
  const ShmSegmentHeader* h = segment->header();
  if (h->magic != ShmSegmentHeader::kMagic || h->size != size ||
      h->rank != rank || h->total_bytes != bytes ||
      Bytes(size, h->ring_capacity) != bytes) {
    return absl::FailedPreconditionError(
        absl::StrCat("shm segment '", name, "' is not rank ", rank,
                     "'s segment of a group of ", size));
  }
  return segment;
}

void ShmSegment::Unlink() {
  if (!linked_) return;
  linked_ = false;
  shm_unlink(name_.c_str());
}

uint64_t ShmSegment::RingOffset(int from) const {
  const int index = from < header_->rank ? from : from - 1;
  return kHeaderBytes + static_cast<uint64_t>(index) *
                            (kRingControlBytes + header_->ring_capacity);
}

ShmRingControl* ShmSegment::ring_control(int from) const {
  return reinterpret_cast<ShmRingControl*>(static_cast<char*>(base_) +
                                           RingOffset(from));
}

char* ShmSegment::ring_data(int from) const {
  return static_cast<char*>(base_) + RingOffset(from) + kRingControlBytes;
}

void ShmSegment::Ring() const {
  // Pairs with the owner's store to `sleeping` and its re-read of the
  // doorbell (both sequentially consistent): either it sees this bump and
  // stays awake, or this load sees it sleeping and wakes it.
  header_->doorbell.fetch_add(1);
  if (header_->sleeping.load() != 0) {
    Futex(&header_->doorbell, FUTEX_WAKE, INT_MAX, nullptr);
  }
}

void ShmSegment::RingAlways() const {
  header_->doorbell.fetch_add(1);
  Futex(&header_->doorbell, FUTEX_WAKE, INT_MAX, nullptr);
}

void FutexWait(std::atomic<uint32_t>* word, uint32_t expected,
               absl::Duration timeout) {
  if (timeout <= absl::ZeroDuration()) return;
  const struct timespec ts = absl::ToTimespec(timeout);
  Futex(word, FUTEX_WAIT, expected, &ts);
}

}  // namespace zshard::comm
