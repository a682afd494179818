// The --dump-master format (a contract read by independent checks): each
// owned fp32 master piece as a raw little-endian float32 file in DIR, and
// DIR/index-<rank>.json, a JSON list of {"param": NAME, "param_start": A,
// "param_end": B, "file": FILE} (FILE relative to DIR; elements [A, B) of
// the flattened param), plus "expert_rank": E for the pieces of expert
// params (the expert-parallel rank whose experts they are; engine_groups.h).
// Also the reader that assembles every rank's dump.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/worker/engine/engine_buffers.h"
#include "common/plan/model_spec.h"

namespace zshard::engine {

// Writes `buffers`' owned master pieces (fp32 params: the param values,
// which are their own master) and index-<rank>.json into `dir`, creating
// it. Files are named master-<rank>-<n>.f32. Fails with the file's error.
absl::Status DumpMasters(const EngineBuffers& buffers, absl::string_view dir);

// Reads every index-*.json in `dir` and assembles each param of `model`
// (by name) as a full fp32 array; an expert param of a job with
// `expert_parallel` E as its E copies concatenated, expert-parallel rank
// e's at [e * numel, (e + 1) * numel) (ReferenceOptimizer::master's form).
// Replicated pieces (several instances) are read again and must agree
// exactly. InvalidArgument when an index or file is malformed, names an
// unknown param or an expert rank outside [0, E) (always 0 for a dense
// param), has the wrong size, disagrees with a replica, or when some
// element of some param is covered by no piece.
absl::StatusOr<std::map<std::string, std::vector<float>>> LoadMasters(
    absl::string_view dir, const plan::ModelSpec& model,
    int expert_parallel = 1);

}  // namespace zshard::engine
