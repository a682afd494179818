// EventLog: ring, pages and the follower wait.
#include "server/events/event_log.h"

#include <algorithm>
#include <utility>

namespace zshard::server {

EventLog::EventLog(EventLogOptions options) : options_(options) {}

int64_t EventLog::Append(Event event) {
  absl::MutexLock lock(&mu_);
  if (event.seq <= last_seq_) event.seq = last_seq_ + 1;
  last_seq_ = event.seq;
  events_.push_back(std::move(event));
  while (static_cast<int>(events_.size()) > std::max(1, options_.capacity)) {
    events_.pop_front();
  }
  return last_seq_;
}

EventPage EventLog::AfterLocked(int64_t after_seq, int limit) {
  EventPage page;
  page.shutdown = shutdown_;
  page.next_seq = std::max<int64_t>(after_seq, 0);
  // Seqs are ascending but may have gaps (restored events): binary search.
  auto it =
      std::upper_bound(events_.begin(), events_.end(), after_seq,
                       [](int64_t seq, const Event& e) { return seq < e.seq; });
  for (; it != events_.end(); ++it) {
    if (static_cast<int>(page.events.size()) >= std::max(1, limit)) {
      page.more = true;
      break;
    }
    page.events.push_back(*it);
    page.next_seq = it->seq;
  }
  return page;
}

EventPage EventLog::After(int64_t after_seq, int limit) {
  absl::MutexLock lock(&mu_);
  return AfterLocked(after_seq, limit);
}

EventPage EventLog::WaitAfter(int64_t after_seq, int limit,
                              absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto ready = [this, after_seq]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return shutdown_ || last_seq_ > after_seq;
  };
  mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
  return AfterLocked(after_seq, limit);
}

int64_t EventLog::last_seq() {
  absl::MutexLock lock(&mu_);
  return last_seq_;
}

void EventLog::Shutdown() {
  absl::MutexLock lock(&mu_);
  shutdown_ = true;
}

}  // namespace zshard::server
