// WatchPlan on gRPC's callback API: one reactor per open stream and one
// notifier thread that waits on the membership's update log and wakes the
// reactors, so thousands of open watches cost no threads. Fan-out is cheap:
// an update is serialised once without its assignments and moves, and each
// watcher gets those bytes plus its own assignment and its own moves (those
// it sends or receives, each with its index in the epoch's list), so an
// update costs O(1 + own moves) per member, not O(world + every move); a
// watcher that falls behind gets the latest state, not every step, and
// never delays the others (each stream writes on its own).
#pragma once

#include <deque>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/server_callback.h"
#include "server/membership/membership.h"
#include "server/service/queued_write_reactor.h"
#include "zshard/v1/types.pb.h"

namespace zshard::server {

// Serialises each plan update once, however many watchers send it (the
// stream is a raw-bytes method, so the bytes go out as they are): the
// update without assignments and moves, each listed member's assignment as
// its own encoded field, and each member's moves as their own encoded
// fields, appended for that member only (appended, an encoded element of a
// repeated field parses as one more element). The moves are encoded once
// per epoch (IndexMovesByMember), not once per update: an epoch's moves
// are fixed when it is proposed, and its COMMITTED, STABLE and snapshot
// updates share them. Thread-safe; keeps the last 16 updates and the moves
// of the last 2 epochs.
class PlanBytesCache {
 public:
  // The bytes of `update` for `worker_id`: its own assignment (if listed)
  // and its own moves, and no one else's.
  grpc::ByteBuffer Get(const std::shared_ptr<const PlanUpdate>& update,
                       const std::string& worker_id);

 private:
  // One epoch's moves, each member's encoded as fields 8 of a PlanUpdate.
  struct EpochMoveBytes {
    int64_t epoch = 0;
    size_t moves = 0;
    int64_t bytes_moved = 0;
    std::unordered_map<std::string, grpc::Slice> own;
  };
  struct Entry {
    std::shared_ptr<const PlanUpdate> update;
    grpc::Slice base;
    std::unordered_map<std::string, grpc::Slice> own;
    std::shared_ptr<const EpochMoveBytes> moves;
  };
  std::shared_ptr<const EpochMoveBytes> MovesOfLocked(const EpochPlan& plan)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  std::deque<std::shared_ptr<const Entry>> entries_ ABSL_GUARDED_BY(mu_);
  std::deque<std::shared_ptr<const EpochMoveBytes>> epoch_moves_
      ABSL_GUARDED_BY(mu_);
};

class PlanWatchReactor;

// An update is fanned out to at most kFanOutChunk watchers, then the
// notifier pauses kFanOutPause (about 25,600 streams a second): at 16,384
// watchers a burst of every write and every ack at once delayed heartbeat
// answers by up to 2.6 s (gRPC's pollers serve both); paced, the p99 was
// 7-92 ms in six runs (docs/benchmarks.md, "Control plane at scale").
inline constexpr int kFanOutChunk = 256;
inline constexpr absl::Duration kFanOutPause = absl::Milliseconds(10);

// Owns the notifier thread; knows the open reactors. Thread-safe. Destroy
// only after the gRPC server has shut down (no reactor left).
class PlanWatchHub {
 public:
  explicit PlanWatchHub(Membership* membership);
  ~PlanWatchHub();

  // A new reactor streaming the plan to worker `worker_id`, or finishing
  // at once with `session` when that is not OK; gRPC owns it.
  grpc::ServerWriteReactor<grpc::ByteBuffer>* Open(
      const grpc::Status& session, const std::string& worker_id);

  void Register(PlanWatchReactor* r);
  void Unregister(PlanWatchReactor* r);
  Membership* membership() { return membership_; }
  PlanBytesCache* bytes() { return &bytes_; }

 private:
  void NotifyLoop();
  // Pokes every reactor, kFanOutChunk at a time.
  void PokeAllPaced();

  Membership* const membership_;
  PlanBytesCache bytes_;
  absl::Mutex mu_;
  std::set<PlanWatchReactor*> reactors_ ABSL_GUARDED_BY(mu_);
  std::thread notifier_;
};

// Streams the snapshot, then the updates, one write at a time; a watcher
// with unsent updates, or many new ones at once, gets the latest state (the
// snapshot) instead. Ends with UNAVAILABLE at shutdown or CANCELLED when
// the client goes away.
class PlanWatchReactor final : public QueuedWriteReactor<grpc::ByteBuffer> {
 public:
  PlanWatchReactor(PlanWatchHub* hub, std::string worker_id);
  // The session was valid: tells the membership this watch is open (and,
  // at Unregister, that it closed).
  void StartWatching();

 private:
  void FetchLocked() override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Unregister() override;

  PlanWatchHub* const hub_;
  const std::string worker_id_;
  // The session was valid: the membership counts this watch as open.
  bool watching_ = false;
  int64_t seq_ ABSL_GUARDED_BY(mu_) = -1;
};

}  // namespace zshard::server
