// The model-parallel parts of the job spec (docs/design.md section 13):
// model.slots read and written, and the checks that tie parallel to the
// model and the world. Used by job_spec.cc.
#pragma once

#include "absl/status/status.h"
#include "common/job/job_spec.h"
#include "nlohmann/json.hpp"

namespace zshard::job {

// Reads model.slots (`slots`, the JSON value) into spec.slots, by slot
// index, under spec.parallel (already read). InvalidArgument in one line
// naming the slot: not an array, an entry not an object or with an unknown
// key, tp or pp missing or out of range, a slot duplicated or missing, a
// slot's params invalid ("model.slots[2]: model spec: ...").
absl::Status ParseModelSlots(const nlohmann::json& slots, JobSpec& spec);

// Fills spec.slots from model.preset split for spec.parallel
// (plan::PresetParallelModel). InvalidArgument naming model.preset when the
// preset cannot be split so.
absl::Status SplitPresetSlots(JobSpec& spec);

// {"slots": [{"tp", "pp", "name" (when set), "params": [...]}, ...]} in slot
// order: the model object of an inline model-parallel job.
nlohmann::json ModelSlotsToJson(const JobSpec& spec);

// The world checks of a model-parallel job, after world is read: world.max
// and world.min multiples of T x P x C, world.instances dividing R x C at
// world.max. OK for a job without model parallelism.
absl::Status CheckParallelJobWorld(const JobSpec& spec);

}  // namespace zshard::job
