// Callback-API WatchEvents: notifier thread and reactors.
#include "server/service/event_watch.h"

#include <utility>

#include "absl/time/time.h"

namespace zshard::server {
namespace {

// Events fetched per poke; a follower far behind catches up in batches.
constexpr int kBatch = 256;

}  // namespace

void ToProto(const Event& e, v1::Event* out) {
  out->set_seq(e.seq);
  out->set_time_ms(e.time_ms);
  out->set_epoch(e.epoch);
  out->set_kind(e.kind);
  out->set_reason(e.reason);
}

EventWatchHub::EventWatchHub(EventLog* events, std::function<void()> on_events)
    : events_(events), on_events_(std::move(on_events)) {
  notifier_ = std::thread([this] { NotifyLoop(); });
}

EventWatchHub::~EventWatchHub() {
  events_->Shutdown();  // ends NotifyLoop if nobody did yet
  notifier_.join();
}

grpc::ServerWriteReactor<v1::Event>* EventWatchHub::Open(int64_t after_seq) {
  if (after_seq < 0) after_seq = events_->last_seq();
  auto* r = new EventWatchReactor(this, after_seq);
  r->StartSendInitialMetadata();  // the client sees the stream is open
  r->Poke();
  return r;
}

void EventWatchHub::Register(EventWatchReactor* r) {
  absl::MutexLock lock(&mu_);
  reactors_.insert(r);
}

void EventWatchHub::Unregister(EventWatchReactor* r) {
  absl::MutexLock lock(&mu_);
  reactors_.erase(r);
}

void EventWatchHub::NotifyLoop() {
  int64_t seq = events_->last_seq();
  while (true) {
    EventPage page = events_->WaitAfter(seq, 1, absl::Seconds(1));
    int64_t last = events_->last_seq();
    if (last > seq || page.shutdown) {
      seq = last;
      {
        absl::MutexLock lock(&mu_);
        for (EventWatchReactor* r : reactors_) r->Poke();
      }
      if (on_events_ && !page.shutdown) on_events_();
    }
    if (page.shutdown) return;
  }
}

EventWatchReactor::EventWatchReactor(EventWatchHub* hub, int64_t after_seq)
    : hub_(hub), seq_(after_seq) {
  hub_->Register(this);
}

void EventWatchReactor::Unregister() { hub_->Unregister(this); }

void EventWatchReactor::FetchLocked() {
  EventPage page = hub_->events()->After(seq_, kBatch);
  for (const Event& e : page.events) {
    queue_.emplace_back();
    ToProto(e, &queue_.back());
  }
  seq_ = page.next_seq;
  if (page.shutdown && queue_.empty()) {
    FinishLocked(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                              "coordinator is shutting down"));
  }
}

}  // namespace zshard::server
