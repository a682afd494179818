// Waiting on a condition with a deadline, the only way tests wait.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <thread>

namespace zshard::testing {

// Evaluates `condition` until it returns true (returns true) or `timeout_ms`
// passes (returns false). `poll_ms` is the interval between evaluations.
inline bool WaitFor(const std::function<bool()>& condition, int64_t timeout_ms,
                    int64_t poll_ms = 20) {
  auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    if (condition()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(poll_ms));
  }
}

}  // namespace zshard::testing
