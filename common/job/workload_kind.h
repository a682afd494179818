// The job spec's workload kinds by name: the one check of a "workload.kind"
// value, shared by the job spec parser and the worker's runner choice.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "common/job/job_spec.h"

namespace zshard::job {

// The kind named `kind` (as WorkloadKindName writes it); InvalidArgument
// naming it otherwise.
absl::StatusOr<WorkloadKind> ParseWorkloadKind(const std::string& kind);

}  // namespace zshard::job
