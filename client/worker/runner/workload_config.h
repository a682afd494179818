// The `workload` section of the job spec, as the worker reads it from the
// job spec JSON that Join returns.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace zshard::worker {

struct WorkloadConfig {
  // "idle" (default), "synthetic" or "regression" (the training path).
  std::string kind = "idle";
  // Steps until the job is done; 0 (default) runs until stopped.
  int64_t steps = 0;
  // Delay between idle steps. Default 100 ms.
  int64_t step_delay_ms = 100;
};

// Reads `workload` from the job spec JSON; absent fields keep their
// defaults. InvalidArgument naming the field for malformed JSON, a wrong
// type, a negative value or a kind this worker cannot run.
absl::StatusOr<WorkloadConfig> ParseWorkloadConfig(
    absl::string_view job_spec_json);

}  // namespace zshard::worker
