// The coordinator's in-memory event log: a bounded ring of the latest
// events, each numbered by a sequence that grows over the life of the job,
// with a wait for followers (DashboardService.WatchEvents).
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/state/types.h"

namespace zshard::server {

struct EventLogOptions {
  // Events kept in memory (the oldest are dropped first). Default 4096.
  int capacity = 4096;
};

// A page of events and where the next one starts.
struct EventPage {
  std::vector<Event> events;  // oldest first
  int64_t next_seq = 0;       // pass as after_seq for the next page
  bool more = false;          // more events follow next_seq
  bool shutdown = false;
};

// Thread-safe.
class EventLog {
 public:
  explicit EventLog(EventLogOptions options = {});

  // Appends `event`, giving it the next sequence number when its seq is 0
  // (a restored event keeps its seq; later ones continue after it).
  // Returns the seq. Wakes waiters.
  int64_t Append(Event event);

  // Up to `limit` (>= 1) kept events with seq > after_seq, oldest first.
  EventPage After(int64_t after_seq, int limit);

  // Like After, but blocks up to `timeout` while there is no such event.
  // Returns early, with shutdown set, after Shutdown().
  EventPage WaitAfter(int64_t after_seq, int limit, absl::Duration timeout);

  // The seq of the latest event (0: none yet).
  int64_t last_seq();

  // Wakes every waiter; later waits return at once.
  void Shutdown();

 private:
  EventPage AfterLocked(int64_t after_seq, int limit)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const EventLogOptions options_;
  absl::Mutex mu_;
  std::deque<Event> events_ ABSL_GUARDED_BY(mu_);  // ascending seq
  int64_t last_seq_ ABSL_GUARDED_BY(mu_) = 0;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace zshard::server
