// A job started without a model (workload 'trainer') takes its first
// trainer's: until one arrives the coordinator answers Join with
// FAILED_PRECONDITION and this trailing metadata key (its value: the job's
// name), and a worker with a trainer sends the trainer's model with
// WorkerService.ProvideModel, then joins again.
#pragma once

namespace zshard::net {

inline constexpr char kAwaitingModelMetadataKey[] = "zshard-awaiting-model";

}  // namespace zshard::net
