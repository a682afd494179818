// The workload a job spec asks for (its `workload.kind`), for one rank of a
// world: the adapter between the job spec and the engine's workloads.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "client/worker/engine/workload.h"
#include "common/job/job_spec.h"

namespace zshard::engine {

// kSynthetic: SyntheticWorkload over the job's model with its global batch
// and layout.expert_parallel (InvalidArgument when it does not divide
// `world`). kRegression: RegressionWorkload; the job's model must be the
// MLP of RegressionModelSpec (any sizes, one dtype), else InvalidArgument
// naming the param (job::RegressionMlpShape, the rule the job spec's
// validation applies), and must have no expert param when expert_parallel
// > 1. kIdle has no gradients: InvalidArgument. Requires
// 0 <= rank < world.
absl::StatusOr<std::unique_ptr<Workload>> MakeWorkload(const job::JobSpec& job,
                                                       int world, int rank);

}  // namespace zshard::engine
