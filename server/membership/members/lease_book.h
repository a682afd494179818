// The heartbeat's side of the member table (docs/design.md section 6): one
// lease per member incarnation, renewed by heartbeats under the book's own lock
// (a hash lookup) and atomics, never under the membership's lock, so a
// heartbeat never waits for planning, moves, hashing or store writes and
// its cost does not grow with the world size.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/state/types.h"

namespace zshard::server {

// One incarnation's lease and what a heartbeat answers from. The id and
// token never change; the rest is written by the membership (state, rank,
// drain) or by heartbeats (times, epoch, step) and read by both.
struct MemberLease {
  MemberLease(std::string id, std::string session_token)
      : worker_id(std::move(id)), token(std::move(session_token)) {}

  const std::string worker_id;
  const std::string token;
  std::atomic<int64_t> last_heartbeat_ms{0};
  std::atomic<int64_t> suspect_since_ms{-1};  // -1: no pending check
  std::atomic<int64_t> epoch{0};              // last reported
  std::atomic<int64_t> step{0};               // last reported or acked
  std::atomic<MemberState> state{MemberState::kJoining};
  std::atomic<int> rank{-1};  // in the committed epoch
  // DRAINING and holding no rank any more: the heartbeat says COMMAND_DRAIN.
  std::atomic<bool> drain_now{false};
  // The member's plan watches (WatchPlan streams) open now, and since when
  // none is (-1: one is open, or none was ever opened). A killed process's
  // connections close at once: a suspect whose watch closed too is dead.
  std::atomic<int> watches{0};
  std::atomic<int64_t> unwatched_since_ms{-1};

  // A heartbeat at `now_ms` reporting `epoch` and `step`; ends a pending
  // suspect check.
  void Renew(int64_t reported_epoch, int64_t reported_step, int64_t now_ms) {
    epoch.store(reported_epoch, std::memory_order_relaxed);
    step.store(reported_step, std::memory_order_relaxed);
    last_heartbeat_ms.store(now_ms, std::memory_order_relaxed);
    suspect_since_ms.store(-1, std::memory_order_relaxed);
  }
  // The step is at least `s` (an ack's).
  void RaiseStep(int64_t s) {
    int64_t cur = step.load(std::memory_order_relaxed);
    while (cur < s && !step.compare_exchange_weak(cur, s)) {
    }
  }
};

// Thread-safe: leases by worker id behind one short lock.
class LeaseBook {
 public:
  void Put(std::shared_ptr<MemberLease> lease);
  void Erase(const std::string& worker_id);

  // The lease of `worker_id` when `token` is its session token:
  // InvalidArgument for a missing or over-long id, NotFound for an unknown
  // one, Unauthenticated for a wrong token. The caller checks the state.
  absl::StatusOr<std::shared_ptr<MemberLease>> Session(
      const std::string& worker_id, const std::string& token) const;
  // The lease of `worker_id`, or null.
  std::shared_ptr<MemberLease> Find(const std::string& worker_id) const;

 private:
  mutable absl::Mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<MemberLease>> by_id_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace zshard::server
