// Whether two model specs are the same model: the same params in the same
// order with the same names, shapes and dtypes. A trainer's model must
// match its job's; a job without a model takes its first trainer's and
// holds every later trainer to it.
#pragma once

#include "absl/status/status.h"
#include "common/plan/model_spec.h"

namespace zshard::plan {

// OK when `got` matches `want`; otherwise InvalidArgument with one line
// "the trainer's model does not match the job's: param 3 'h.w' has shape
// [4, 8], the job's 'h.w' has [8, 4]" (first difference, or the param
// counts with the first missing or extra name).
absl::Status MatchModel(const ModelSpec& want, const ModelSpec& got);

}  // namespace zshard::plan
