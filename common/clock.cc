#include "common/clock.h"

#include <chrono>

namespace zshard {

int64_t RealClock::NowMs() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

Clock* RealClock::Get() {
  static RealClock* clock = new RealClock();  // never destroyed
  return clock;
}

int64_t FakeClock::NowMs() const {
  absl::MutexLock lock(&mu_);
  return now_ms_;
}

void FakeClock::AdvanceMs(int64_t ms) {
  absl::MutexLock lock(&mu_);
  now_ms_ += ms;
}

int64_t WallTimeMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace zshard
