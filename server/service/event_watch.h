// WatchEvents on gRPC's callback API: one reactor per follower and one
// notifier thread that waits on the event log and wakes the reactors, so
// open follows cost no threads.
#pragma once

#include <deque>
#include <functional>
#include <set>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/support/server_callback.h"
#include "server/events/event_log.h"
#include "server/service/queued_write_reactor.h"
#include "zshard/v1/dashboard_service.pb.h"

namespace zshard::server {

class EventWatchReactor;

// Owns the notifier thread; knows the open reactors. Thread-safe. Destroy
// only after the gRPC server has shut down (no reactor left). Borrows
// `events`.
class EventWatchHub {
 public:
  // `on_events` (may be empty) runs on the notifier thread after new
  // events, outside every lock (e.g. to warm caches after a commit).
  explicit EventWatchHub(EventLog* events,
                         std::function<void()> on_events = nullptr);
  ~EventWatchHub();

  // A new reactor following the log after `after_seq` (-1: only new
  // events); gRPC owns it.
  grpc::ServerWriteReactor<v1::Event>* Open(int64_t after_seq);

  void Register(EventWatchReactor* r);
  void Unregister(EventWatchReactor* r);
  EventLog* events() { return events_; }

 private:
  void NotifyLoop();

  EventLog* const events_;
  const std::function<void()> on_events_;
  absl::Mutex mu_;
  std::set<EventWatchReactor*> reactors_ ABSL_GUARDED_BY(mu_);
  std::thread notifier_;
};

// Writes the events after its position, one write at a time; ends with
// UNAVAILABLE at shutdown or CANCELLED when the client goes away.
class EventWatchReactor final : public QueuedWriteReactor<v1::Event> {
 public:
  EventWatchReactor(EventWatchHub* hub, int64_t after_seq);

 private:
  void FetchLocked() override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Unregister() override;

  EventWatchHub* const hub_;
  int64_t seq_ ABSL_GUARDED_BY(mu_);
};

// The proto of `e`.
void ToProto(const Event& e, v1::Event* out);

}  // namespace zshard::server
