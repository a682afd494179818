// Exponential backoff with jitter for reconnecting to the coordinator.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>

namespace zshard::worker {

// Delays that double from min_ms to max_ms, each drawn uniformly from
// [delay/2, delay] so that many workers do not retry in lock step. Not
// thread-safe.
class Backoff {
 public:
  Backoff(int64_t min_ms, int64_t max_ms)
      : min_ms_(std::max<int64_t>(1, min_ms)),
        max_ms_(std::max(max_ms, min_ms_)),
        next_ms_(min_ms_),
        rng_(std::random_device{}()) {}

  // The delay before the next attempt, in milliseconds.
  int64_t NextMs() {
    const int64_t delay = next_ms_;
    next_ms_ = std::min(max_ms_, next_ms_ * 2);
    std::uniform_int_distribution<int64_t> jitter(delay / 2, delay);
    return jitter(rng_);
  }

  // Back to min_ms after a success.
  void Reset() { next_ms_ = min_ms_; }

 private:
  const int64_t min_ms_;
  const int64_t max_ms_;
  int64_t next_ms_;
  std::mt19937_64 rng_;
};

}  // namespace zshard::worker
