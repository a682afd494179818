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
std::vector<std::string> ExplainCluster(const ClusterView& view,
                                        const job::WorldSpec& world,
                                        const std::vector<Event>& recent,
                                        int64_t settle_ms);

}  // namespace zshard::server
