// TrainRunner's life cycle as two enums, each with its allowed
// transitions in one table: what its own thread does (TrainActivity) and
// what the session allows it to do (TrainStepping). The two change on
// different threads' requests and combine freely (a Pause waits while a
// step runs), so each is one enum rather than one enum of their product.
#pragma once

#include "client/worker/runner/state_table.h"

namespace zshard::worker {

// What the workload's thread does.
enum class TrainActivity {
  kIdle,        // waits for work
  kStepping,    // runs one step
  kPreparing,   // prepares a committed epoch (moves, engine)
  kCancelling,  // that preparation was cancelled by a pause or an abort
  kShutdown,    // the destructor stops the thread (final)
};

// Whether the workload may step.
enum class TrainStepping {
  kInactive,  // no stepping
  kActive,    // steps while it has a stable engine
  kStopping,  // steps until the agreed stop (a Pause waits for it)
  kPausing,   // a Pause waits and nothing steps (a stable epoch applied
              // meanwhile steps up to the stop: kStopping)
  kDone,      // the job's steps are done (final)
};

const char* TrainActivityName(TrainActivity activity);
const char* TrainSteppingName(TrainStepping stepping);

const StateTable<TrainActivity>& TrainActivityTable();
const StateTable<TrainStepping>& TrainSteppingTable();

}  // namespace zshard::worker
