// The `workload` section of the job spec, as the worker reads it from the
// job spec JSON that Join returns.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/job/job_spec.h"

namespace zshard::worker {

// Absent fields take the job spec's defaults (common/job/job_spec.h).
struct WorkloadConfig {
  // "idle", "synthetic" or "regression" (the training path).
  std::string kind = job::WorkloadKindName(job::WorkloadSpec().kind);
  // Steps until the job is done; 0 runs until stopped.
  int64_t steps = job::WorkloadSpec().steps;
  // Delay between idle steps.
  int64_t step_delay_ms = job::WorkloadSpec().step_delay_ms;
};

// Reads `workload` from the job spec JSON; absent fields keep their
// defaults. InvalidArgument naming the field for malformed JSON, a wrong
// type, a negative value or a kind this worker cannot run.
absl::StatusOr<WorkloadConfig> ParseWorkloadConfig(
    absl::string_view job_spec_json);

}  // namespace zshard::worker
