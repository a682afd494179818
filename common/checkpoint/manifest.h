// A checkpoint's manifest (docs/design.md section 7): manifest.json in the
// checkpoint's directory holds the proto JSON of v1::CheckpointManifest.
// The coordinator writes it (atomically) once every rank file is in;
// `zshard-coordinator --restore DIR` reads and validates it.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/plan/model_spec.h"
#include "common/plan/parallel.h"
#include "zshard/v1/worker_service.pb.h"

namespace zshard::checkpoint {

// DIR/manifest.json.
std::string ManifestPath(const std::string& dir);

// Writes `manifest` as JSON to ManifestPath(manifest.dir()) through a
// temporary file and a rename, so a reader never sees half a manifest.
// InvalidArgument without a dir; the I/O error naming the path otherwise.
absl::Status WriteManifest(const v1::CheckpointManifest& manifest);

// Reads DIR/manifest.json. NotFound when it is missing, DataLoss when it
// does not parse as a manifest.
absl::StatusOr<v1::CheckpointManifest> ReadManifest(const std::string& dir);

// OK when `manifest` belongs to `model` (the same param names and element
// counts, in order) and is well formed (step >= 0, at least one file, every
// file's path relative and its ranges inside its param). InvalidArgument
// naming the first difference otherwise; a model-parallel checkpoint does
// not belong to one model.
absl::Status ValidateManifest(const v1::CheckpointManifest& manifest,
                              const plan::ModelSpec& model);

// ValidateManifest for a job of model-parallel sizes `sizes` whose slots'
// models are `slots` (by slot index): the manifest was written with the
// same tensor and pipeline sizes (plan::CheckRestoreSizes), lists every slot's
// params (slot_params) and each file's ranges lie inside its slot's model.
absl::Status ValidateSlotsManifest(const v1::CheckpointManifest& manifest,
                                   const plan::ParallelSizes& sizes,
                                   absl::Span<const plan::ModelSpec> slots);

}  // namespace zshard::checkpoint
