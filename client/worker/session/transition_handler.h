// Follows the coordinator's plan updates for one worker incarnation: stops
// the runner at a step boundary when an epoch is proposed, hands each
// committed epoch (with its state moves) to the runner, acks ACTIVE when
// the runner says the epoch is ready, and tells it when the epoch is
// stable (old state may go, ranks step). No gRPC inside: updates in, acks
// out, so it is tested without a server.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "client/worker/runner/runner.h"
#include "client/worker/runner/state_table.h"
#include "zshard/v1/types.pb.h"
#include "zshard/v1/worker_service.pb.h"

namespace zshard::worker {

// One acknowledgement to send with AckTransition.
struct TransitionAck {
  int64_t epoch = 0;
  v1::AckPhase phase = v1::ACK_PHASE_UNSPECIFIED;
  int64_t step = 0;
  bool commit_point_passed = false;
  // PREPARED only (see AckTransitionRequest).
  int64_t adam_step = 0;
  bool commit_pending = false;
  std::vector<double> commit_values;
};

// Where the committed epoch this worker applied stands.
enum class EpochPhase {
  kPreparing,      // handed to the runner, which prepares it
  kReady,          // the runner is ready (ACTIVE acked); not yet stable
  kStableUnready,  // stable while this worker, holding no rank in it,
                   // still prepares (it only sent state)
  kStable,         // stable and ready (also the state before any epoch)
};

const char* EpochPhaseName(EpochPhase phase);
// The allowed changes of EpochPhase.
const StateTable<EpochPhase>& EpochPhaseTable();

// Applies plan updates in order. Every update may be delivered more than
// once (the watch stream replays the current state on reconnect, and a
// restarted coordinator replays it again); applying it again is harmless:
// the same ack at most, never a second execution of an epoch's moves.
// Thread-safe. The handler holds its lock while it calls the runner, so
// the runner must not wait for its ready callback to return.
class TransitionHandler {
 public:
  // `runner` must outlive the handler.
  TransitionHandler(std::string worker_id, Runner* runner);

  // Applies `update`; returns the ack to send, or nullopt when none is due
  // (a stale epoch, an abandoned proposal, an epoch without this worker, a
  // committed epoch the runner is still preparing, a stable epoch).
  std::optional<TransitionAck> Apply(const v1::PlanUpdate& update);

  // The runner finished preparing committed epoch `epoch` (its ready
  // callback): returns the ACTIVE ack to send, or nullopt when the epoch is
  // no longer the one in force (a later proposal superseded it) or this
  // worker is not listed in it.
  std::optional<TransitionAck> EpochReady(int64_t epoch);

  // Observers: never blocked by an update being applied (a heartbeat reads
  // them while a proposal waits for the runner to stop).
  // The last committed epoch this worker applied (0: none yet).
  int64_t epoch() const;
  // This worker's rank in that epoch (-1: spare or not a member).
  int rank() const;
  // The last stable epoch this worker applied (0: none yet) and its rank
  // in it (-1: none).
  int64_t stable_epoch() const;
  int stable_rank() const;

 private:
  std::optional<TransitionAck> Proposed(const v1::PlanUpdate& update,
                                        const v1::Assignment* mine)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::optional<TransitionAck> Committed(const v1::PlanUpdate& update,
                                         const v1::Assignment* mine)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Stable(const v1::PlanUpdate& update) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  EpochInfo MakeEpochInfo(const v1::PlanUpdate& update,
                          const v1::Assignment* mine) const;
  TransitionAck ActiveAck(int64_t step) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Copies the observed fields for the lock-free observers.
  void PublishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SetPhaseLocked(EpochPhase to) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The runner said the committed epoch is ready (kReady, kStable).
  bool ReadyLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string worker_id_;
  Runner* const runner_;
  mutable absl::Mutex mu_;
  int64_t committed_epoch_ ABSL_GUARDED_BY(mu_) = 0;
  int rank_ ABSL_GUARDED_BY(mu_) = -1;
  // This worker is listed in the committed epoch (a rank or a spare).
  bool listed_ ABSL_GUARDED_BY(mu_) = false;
  int64_t resume_step_ ABSL_GUARDED_BY(mu_) = 0;
  // The committed epoch's life cycle: kStable or kStableUnready exactly
  // when stable_epoch_ == committed_epoch_.
  EpochPhase phase_ ABSL_GUARDED_BY(mu_) = EpochPhase::kStable;
  // The last stable epoch (0: none yet) and this worker's rank in it; a
  // later epoch's commit keeps them (the state held until it is stable).
  int64_t stable_epoch_ ABSL_GUARDED_BY(mu_) = 0;
  int stable_rank_ ABSL_GUARDED_BY(mu_) = -1;
  // The proposed epoch this worker prepared for (0: none).
  int64_t pending_epoch_ ABSL_GUARDED_BY(mu_) = 0;
  // Written under mu_ by PublishLocked, read by the observers.
  std::atomic<int64_t> seen_epoch_{0};
  std::atomic<int> seen_rank_{-1};
  std::atomic<int64_t> seen_stable_epoch_{0};
  std::atomic<int> seen_stable_rank_{-1};
};

}  // namespace zshard::worker
