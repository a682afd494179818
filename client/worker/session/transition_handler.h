// Follows the coordinator's plan updates for one worker incarnation: stops
// the workload at a step boundary when an epoch is proposed, resumes it
// from the resume step when the epoch commits (or from where it stopped
// when the proposal is abandoned), and says which acknowledgement to send.
// No gRPC inside: updates in, acks out, so it is tested without a server.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "client/worker/workload/stepping_workload.h"
#include "zshard/v1/types.pb.h"
#include "zshard/v1/worker_service.pb.h"

namespace zshard::worker {

// One acknowledgement to send with AckTransition.
struct TransitionAck {
  int64_t epoch = 0;
  v1::AckPhase phase = v1::ACK_PHASE_UNSPECIFIED;
  int64_t step = 0;
  bool commit_point_passed = false;
};

// Applies plan updates in order. Every update may be delivered more than
// once (the watch stream replays the current state on reconnect); applying
// it again is harmless and yields the same ack. Thread-safe.
class TransitionHandler {
 public:
  // `workload` must outlive the handler.
  TransitionHandler(std::string worker_id, SteppingWorkload* workload);

  // Applies `update`; returns the ack to send, or nullopt when none is due
  // (a stale epoch, an abandoned proposal, an epoch without this worker).
  std::optional<TransitionAck> Apply(const v1::PlanUpdate& update);

  // The last committed epoch this worker applied (0: none yet).
  int64_t epoch() const;
  // This worker's rank in that epoch (-1: spare or not a member).
  int rank() const;

 private:
  const std::string worker_id_;
  SteppingWorkload* const workload_;
  mutable absl::Mutex mu_;
  int64_t committed_epoch_ ABSL_GUARDED_BY(mu_) = 0;
  int rank_ ABSL_GUARDED_BY(mu_) = -1;
  // The proposed epoch this worker prepared for (0: none).
  int64_t pending_epoch_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace zshard::worker
