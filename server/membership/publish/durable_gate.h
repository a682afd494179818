// What a change makes visible (plan updates, heartbeat facts, events) is
// shown only once the change's store writes are durable: a leader killed
// between the two must not have told anyone of an epoch that its successor
// never reads from the store (docs/design.md section 11).
#pragma once

#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

namespace zshard::server {

// Items in the order staged, each shown once the store write of its
// change is durable. Thread-compatible: its owner locks.
template <typename T>
class DurableGate {
 public:
  // Holds `item` until the next Seal names the write it waits for.
  void Stage(T item) { staged_.push_back({kUnsealed, std::move(item)}); }

  // Every item staged since the last Seal waits for the StoreWriter's
  // `ticket` (0: none, shown at once). Returns the items now shown, in
  // order.
  std::vector<T> Seal(int64_t ticket) {
    for (auto& [waits_for, item] : staged_) {
      if (waits_for == kUnsealed) waits_for = ticket;
    }
    return Ready();
  }

  // Tickets up to `durable` are durable. Returns the items now shown, in
  // order.
  std::vector<T> Release(int64_t durable) {
    if (durable > durable_) durable_ = durable;
    return Ready();
  }

 private:
  static constexpr int64_t kUnsealed = -1;

  std::vector<T> Ready() {
    std::vector<T> out;
    while (!staged_.empty() && staged_.front().first != kUnsealed &&
           staged_.front().first <= durable_) {
      out.push_back(std::move(staged_.front().second));
      staged_.pop_front();
    }
    return out;
  }

  std::deque<std::pair<int64_t, T>> staged_;
  int64_t durable_ = 0;
};

}  // namespace zshard::server
