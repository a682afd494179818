// After a step: the checkpoint of docs/design.md section 7 on this rank. Every
// checkpoint.every_steps steps, a rank of instance 0 writes its owned
// master, m and v in param space into the step's directory (a
// model-parallel job's slot into its own sub-directory, in its slot's
// param space) and reports the file to the coordinator, which commits the
// manifest once every rank's file is in. Failures are logged and reported,
// never fatal: training goes on and the previous checkpoint stays the newest
// complete one.
#pragma once

#include <cstdint>

#include "client/worker/engine/step_engine.h"
#include "client/worker/runner/runner.h"
#include "common/job/job_spec.h"

namespace zshard::worker {

// True when step `step` of a rank of `instance` is a checkpoint step.
bool IsCheckpointStep(const job::CheckpointSpec& spec, int instance,
                      int64_t step);

// Writes `engine`'s state as rank `epoch.rank`'s file of step
// engine.step() into job.checkpoint.dir's step directory (a model-parallel
// job's into its slot-S/ sub-directory, as its slot's data-parallel rank)
// and reports it through `report`, or a failed write through `failed`
// (either may be empty: nothing is reported). Returns the write's or
// report's error, already logged.
absl::Status WriteStepCheckpoint(const job::JobSpec& job,
                                 const EpochInfo& epoch,
                                 const engine::StepEngine& engine,
                                 const Runner::CheckpointReporter& report,
                                 const Runner::FailureReporter& failed);

}  // namespace zshard::worker
