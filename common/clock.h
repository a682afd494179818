// Clocks: an interface so that leases and timeouts can be tested with a fake
// clock, a real monotonic implementation, and the fake.
#pragma once

#include <cstdint>

#include "absl/synchronization/mutex.h"

namespace zshard {

// A monotonic millisecond clock. Implementations are thread-safe.
class Clock {
 public:
  virtual ~Clock() = default;
  // Milliseconds since an arbitrary fixed origin; never decreases.
  virtual int64_t NowMs() const = 0;
};

// The process's steady clock. Thread-safe; a shared instance lives forever.
class RealClock final : public Clock {
 public:
  int64_t NowMs() const override;
  static Clock* Get();
};

// A clock that moves only when told to. Thread-safe.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(int64_t start_ms = 0) : now_ms_(start_ms) {}
  int64_t NowMs() const override;
  void AdvanceMs(int64_t ms);

 private:
  mutable absl::Mutex mu_;
  int64_t now_ms_ ABSL_GUARDED_BY(mu_);
};

// Wall-clock time in milliseconds since the Unix epoch (for timestamps shown
// to people, never for timeouts).
int64_t WallTimeMs();

}  // namespace zshard
