// Explain: a few sentences on why the world, the ranks and the spares are
// what they are, from the cluster view, the world policy's inputs and the
// latest events.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/job/job_spec.h"
#include "server/membership/membership.h"

namespace zshard::server {

// Full sentences, most important first. `recent` is the event log's tail,
// oldest first (the last commit/propose/dead/leave ones are quoted);
// `settle_ms` is the job's transition_settle_ms (the coalescing rule).
// With `model_parallel` the sentences on the world's shape, the policy and
// the spares are left to ExplainParallel.
std::vector<std::string> ExplainCluster(const ClusterView& view,
                                        const job::WorldSpec& world,
                                        const std::vector<Event>& recent,
                                        int64_t settle_ms,
                                        bool model_parallel = false);

// A model-parallel job's sentences (none for another job), to put first:
// the replica's shape and slots, the slots' data-parallel domains, the
// world policy over whole replicas and where the tensor-parallel groups
// sit on nodes (explain_parallel.cc).
std::vector<std::string> ExplainParallel(const ClusterView& view,
                                         const job::JobSpec& job);

}  // namespace zshard::server
