// A follower of the coordinator's event log through its own
// DashboardService.WatchEvents (the gRPC stream zshardctl events --follow
// reads), for the Server-Sent Events routes: a reader thread queues the
// events; the HTTP handler takes them with a timeout so that it notices a
// browser that went away and a server that stops.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "zshard/v1/dashboard_service.pb.h"

namespace zshard::server::web {

// Owns its reader thread and its call. Not copyable; thread-safe.
class EventFeed {
 public:
  // Follows the log after `after_seq` (-1: only new events) over `channel`
  // (not null).
  EventFeed(std::shared_ptr<grpc::Channel> channel, int64_t after_seq);
  // Cancels the call and joins the reader.
  ~EventFeed();
  EventFeed(const EventFeed&) = delete;
  EventFeed& operator=(const EventFeed&) = delete;

  // The next event, waiting at most `timeout`: nullopt on timeout; the
  // stream's end status (never OK) once it ended and the queue is empty
  // goes to `ended`.
  std::optional<v1::Event> Next(absl::Duration timeout, absl::Status* ended);

 private:
  void ReadLoop(std::shared_ptr<grpc::Channel> channel, int64_t after_seq);

  grpc::ClientContext context_;
  absl::Mutex mu_;
  std::deque<v1::Event> queue_ ABSL_GUARDED_BY(mu_);
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status end_ ABSL_GUARDED_BY(mu_);
  std::thread reader_;
};

}  // namespace zshard::server::web
