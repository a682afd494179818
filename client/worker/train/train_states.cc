// The tables of TrainRunner's two life cycles.

#include "client/worker/train/train_states.h"

namespace zshard::worker {

const char* TrainActivityName(TrainActivity activity) {
  switch (activity) {
    case TrainActivity::kIdle:
      return "idle";
    case TrainActivity::kStepping:
      return "stepping";
    case TrainActivity::kPreparing:
      return "preparing";
    case TrainActivity::kCancelling:
      return "cancelling";
    case TrainActivity::kShutdown:
      return "shutdown";
  }
  return "unknown";
}

const char* TrainSteppingName(TrainStepping stepping) {
  switch (stepping) {
    case TrainStepping::kInactive:
      return "inactive";
    case TrainStepping::kActive:
      return "active";
    case TrainStepping::kStopping:
      return "stopping";
    case TrainStepping::kPausing:
      return "pausing";
    case TrainStepping::kDone:
      return "done";
  }
  return "unknown";
}

const StateTable<TrainActivity>& TrainActivityTable() {
  using A = TrainActivity;
  static const StateTable<A>* const table = new StateTable<A>(
      "train activity", &TrainActivityName,
      {
          // The thread takes work: a step or a queued commit.
          {A::kIdle, A::kStepping},
          {A::kIdle, A::kPreparing},
          // The work ends.
          {A::kStepping, A::kIdle},
          {A::kPreparing, A::kIdle},
          {A::kCancelling, A::kIdle},
          // A pause, an abort or the destructor cancels a preparation.
          {A::kPreparing, A::kCancelling},
          // The destructor, whatever runs.
          {A::kIdle, A::kShutdown},
          {A::kStepping, A::kShutdown},
          {A::kPreparing, A::kShutdown},
          {A::kCancelling, A::kShutdown},
      });
  return *table;
}

const StateTable<TrainStepping>& TrainSteppingTable() {
  using S = TrainStepping;
  static const StateTable<S>* const table = new StateTable<S>(
      "train stepping", &TrainSteppingName,
      {
          // Activate (the session), or a stable epoch applied with a rank.
          {S::kInactive, S::kActive},
          {S::kStopping, S::kActive},
          {S::kPausing, S::kActive},
          {S::kPausing, S::kStopping},
          // Pause asks for the agreed stop, then waits.
          {S::kActive, S::kStopping},
          {S::kInactive, S::kPausing},
          // A step that failed or carried the stop flag ends the stepping;
          // a waiting Pause stays until it returns.
          {S::kActive, S::kInactive},
          {S::kStopping, S::kPausing},
          // The Pause returns.
          {S::kStopping, S::kInactive},
          {S::kPausing, S::kInactive},
          // The last step.
          {S::kActive, S::kDone},
          {S::kStopping, S::kDone},
          // A step started before a Pause or a failure ends the job.
          {S::kInactive, S::kDone},
          {S::kPausing, S::kDone},
      });
  return *table;
}

}  // namespace zshard::worker
