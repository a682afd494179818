// The write side shared by the server-streaming watches (WatchPlan,
// WatchEvents): a queue written one message at a time, refilled when a
// notifier pokes or the queue drains, and finished exactly once, after the
// write in flight if there is one.
#pragma once

#include <deque>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/support/server_callback.h"

namespace zshard::server {

// gRPC owns the reactor; OnDone unregisters it and deletes it. Subclasses
// fill queue_ in FetchLocked and say where they are registered.
template <typename Msg>
class QueuedWriteReactor : public grpc::ServerWriteReactor<Msg> {
 public:
  // Fetches what is new and writes it (from the notifier thread).
  void Poke() {
    absl::MutexLock lock(&mu_);
    if (finished_) return;
    FetchLocked();
    if (!writing_) WriteNextLocked();
  }

  // Ends the stream with `status` (e.g. a bad session at open).
  void Reject(grpc::Status status) {
    absl::MutexLock lock(&mu_);
    FinishLocked(std::move(status));
  }

  void OnWriteDone(bool ok) final {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    queue_.pop_front();
    if (finish_after_write_) {
      this->Finish(final_status_);
      return;
    }
    if (!ok) {
      FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "client left"));
      return;
    }
    // A long backlog is fetched a batch at a time.
    if (queue_.empty()) FetchLocked();
    if (!finished_) WriteNextLocked();
  }

  void OnCancel() final {
    absl::MutexLock lock(&mu_);
    FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "watch cancelled"));
  }

  void OnDone() final {
    Unregister();
    delete this;
  }

 protected:
  QueuedWriteReactor() = default;
  ~QueuedWriteReactor() override = default;

  // Appends what is new to queue_; may call FinishLocked (e.g. at
  // shutdown).
  virtual void FetchLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) = 0;
  // Removes the reactor from whatever pokes it; called once, at OnDone.
  virtual void Unregister() = 0;

  // Finishes the stream with `status` once; after the write in flight, if
  // any.
  void FinishLocked(grpc::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_) return;
    finished_ = true;
    if (writing_) {
      finish_after_write_ = true;
      final_status_ = std::move(status);
      return;
    }
    this->Finish(std::move(status));
  }

  // Messages queued but not yet handed to gRPC.
  size_t UnsentLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return queue_.size() - (writing_ ? 1 : 0);
  }
  // Forgets the messages not yet handed to gRPC (a slow reader gets the
  // latest state instead of every step).
  void DropUnsentLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    queue_.resize(writing_ ? 1 : 0);
  }

  absl::Mutex mu_;
  std::deque<Msg> queue_ ABSL_GUARDED_BY(mu_);

 private:
  void WriteNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (queue_.empty() || finish_after_write_) return;
    writing_ = true;
    this->StartWrite(&queue_.front());
  }

  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool finish_after_write_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status final_status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace zshard::server
