// WatchPlan on gRPC's callback API: one reactor per open stream and one
// notifier thread that waits on the membership's update log and wakes the
// reactors, so 1,000 open watches cost no threads.
#pragma once

#include <deque>
#include <memory>
#include <set>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/server_callback.h"
#include "server/membership/membership.h"
#include "server/service/queued_write_reactor.h"
#include "zshard/v1/types.pb.h"

namespace zshard::server {

// Serialises each plan update once, however many watchers send it (the
// stream is a raw-bytes method, so the bytes go out as they are).
// Thread-safe; keeps the last 16.
class PlanBytesCache {
 public:
  std::shared_ptr<const grpc::ByteBuffer> Get(
      const std::shared_ptr<const PlanUpdate>& update);

 private:
  struct Entry {
    std::shared_ptr<const PlanUpdate> update;
    std::shared_ptr<const grpc::ByteBuffer> bytes;
  };
  absl::Mutex mu_;
  std::deque<Entry> entries_ ABSL_GUARDED_BY(mu_);
};

class PlanWatchReactor;

// Owns the notifier thread; knows the open reactors. Thread-safe. Destroy
// only after the gRPC server has shut down (no reactor left).
class PlanWatchHub {
 public:
  explicit PlanWatchHub(Membership* membership);
  ~PlanWatchHub();

  // A new reactor streaming the plan to one watcher, or finishing at once
  // with `session` when that is not OK; gRPC owns it.
  grpc::ServerWriteReactor<grpc::ByteBuffer>* Open(const grpc::Status& session);

  void Register(PlanWatchReactor* r);
  void Unregister(PlanWatchReactor* r);
  Membership* membership() { return membership_; }
  PlanBytesCache* bytes() { return &bytes_; }

 private:
  void NotifyLoop();

  Membership* const membership_;
  PlanBytesCache bytes_;
  absl::Mutex mu_;
  std::set<PlanWatchReactor*> reactors_ ABSL_GUARDED_BY(mu_);
  std::thread notifier_;
};

// Streams the snapshot, then every update, one write at a time; ends with
// UNAVAILABLE at shutdown or CANCELLED when the client goes away.
class PlanWatchReactor final : public QueuedWriteReactor<grpc::ByteBuffer> {
 public:
  explicit PlanWatchReactor(PlanWatchHub* hub);

 private:
  void FetchLocked() override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Unregister() override;

  PlanWatchHub* const hub_;
  int64_t seq_ ABSL_GUARDED_BY(mu_) = -1;
};

}  // namespace zshard::server
