// A view of one single-producer single-consumer byte ring in shared memory
// (ShmRingControl plus its data): the producer appends bytes and publishes
// the head, the consumer copies bytes out and publishes the tail. Copies
// wrap around the end of the data.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>

#include "client/worker/comm/shm_segment.h"

namespace zshard::comm {

// Not thread-safe: one side (producer or consumer) per view; the other side
// runs in another view, usually in another process.
class ShmRing {
 public:
  ShmRing() = default;
  ShmRing(ShmRingControl* control, char* data, uint64_t capacity)
      : control_(control), data_(data), capacity_(capacity) {}

  // Producer: bytes that can be written now.
  uint64_t Free() const {
    return capacity_ - (head_ - control_->tail.load(std::memory_order_acquire));
  }
  // Producer: copies `n` <= Free() bytes in; Publish() makes them visible.
  void Write(const void* src, uint64_t n) {
    Copy(head_, src, n);
    head_ += n;
  }
  void Publish() { control_->head.store(head_, std::memory_order_release); }

  // Consumer: bytes that can be read now.
  uint64_t Available() const {
    return control_->head.load(std::memory_order_acquire) - tail_;
  }
  // Consumer: copies `n` <= Available() bytes out without consuming them.
  void Peek(void* dst, uint64_t n) const {
    const uint64_t at = tail_ & (capacity_ - 1);
    const uint64_t first = std::min(n, capacity_ - at);
    std::memcpy(dst, data_ + at, first);
    if (first < n)
      std::memcpy(static_cast<char*>(dst) + first, data_, n - first);
  }
  // Consumer: copies `n` <= Available() bytes out and frees them (made
  // visible to the producer by Release()).
  void Read(void* dst, uint64_t n) {
    Peek(dst, n);
    tail_ += n;
  }
  void Release() { control_->tail.store(tail_, std::memory_order_release); }

  // Producer: messages the consumer has taken out so far.
  uint64_t Acked() const {
    return control_->acked.load(std::memory_order_acquire);
  }
  // Consumer: counts one more message as taken out.
  void Ack() { control_->acked.fetch_add(1, std::memory_order_release); }

 private:
  void Copy(uint64_t pos, const void* src, uint64_t n) {
    const uint64_t at = pos & (capacity_ - 1);
    const uint64_t first = std::min(n, capacity_ - at);
    std::memcpy(data_ + at, src, first);
    if (first < n) {
      std::memcpy(data_, static_cast<const char*>(src) + first, n - first);
    }
  }

  ShmRingControl* control_ = nullptr;
  char* data_ = nullptr;
  uint64_t capacity_ = 0;
  // This side's own counter (head for the producer, tail for the consumer).
  uint64_t head_ = 0;
  uint64_t tail_ = 0;
};

}  // namespace zshard::comm
