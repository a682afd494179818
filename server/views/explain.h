// Explain: a few sentences on why the world, the ranks and the spares are
// what they are, from the cluster view, the world policy's inputs and the
// latest events.
#pragma once

#include <string>
#include <vector>

#include "common/job/job_spec.h"
#include "server/membership/membership.h"

namespace zshard::server {

// Full sentences, most important first. `recent` is the event log's tail,
// oldest first (the last commit/propose/dead/leave ones are quoted).
std::vector<std::string> ExplainCluster(const ClusterView& view,
                                        const job::WorldSpec& world,
                                        const std::vector<Event>& recent);

}  // namespace zshard::server
