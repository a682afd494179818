// The WatchEvents reader behind the SSE routes (see event_feed.h).
#include "server/web/event_feed.h"

#include <utility>

#include "common/grpc_status.h"
#include "zshard/v1/dashboard_service.grpc.pb.h"

namespace zshard::server::web {

EventFeed::EventFeed(std::shared_ptr<grpc::Channel> channel,
                     int64_t after_seq) {
  reader_ = std::thread([this, channel = std::move(channel), after_seq] {
    ReadLoop(channel, after_seq);
  });
}

EventFeed::~EventFeed() {
  context_.TryCancel();
  if (reader_.joinable()) reader_.join();
}

void EventFeed::ReadLoop(std::shared_ptr<grpc::Channel> channel,
                         int64_t after_seq) {
  v1::DashboardService::Stub stub(channel);
  v1::WatchEventsRequest req;
  req.set_after_seq(after_seq);
  std::unique_ptr<grpc::ClientReader<v1::Event>> reader =
      stub.WatchEvents(&context_, req);
  v1::Event event;
  while (reader->Read(&event)) {
    absl::MutexLock lock(&mu_);
    queue_.push_back(event);
  }
  grpc::Status status = reader->Finish();
  absl::MutexLock lock(&mu_);
  done_ = true;
  end_ = status.ok() ? absl::UnavailableError("the event stream ended")
                     : FromGrpcStatus(status);
}

std::optional<v1::Event> EventFeed::Next(absl::Duration timeout,
                                         absl::Status* ended) {
  absl::MutexLock lock(&mu_);
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !queue_.empty() || done_;
  };
  mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
  if (!queue_.empty()) {
    v1::Event e = std::move(queue_.front());
    queue_.pop_front();
    return e;
  }
  if (done_ && ended != nullptr) *ended = end_;
  return std::nullopt;
}

}  // namespace zshard::server::web
