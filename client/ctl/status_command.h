// `zshardctl --coordinator HOST:PORT[,HOST:PORT...] status [--output
// json]`: the cluster status from the leading coordinator's
// DashboardService (standbys followed to it), as a table for people or as
// the JSON contract for machines.
#pragma once

#include <string>

#include "client/ctl/commands.h"
#include "nlohmann/json.hpp"
#include "zshard/v1/dashboard_service.pb.h"

namespace zshard::ctl {

// The JSON contract: {"job", "epoch", "state", "world", "instances",
// "plan_hash", "leader" (HOST:PORT of the leading coordinator; null when
// the coordinator does not say), "standbys" (HOST:PORT of each standby
// coordinator; [] with one coordinator), "members": [{"name", "worker_id",
// "state", "rank", "instance", "shard_rank", "step", "last_heartbeat_ms",
// "labels"}]}.
nlohmann::json ClusterStatusToJson(const v1::GetClusterStatusResponse& status);

// A human table of the same fields: a header line, a line with the leader
// and the standbys ("-" for none), then a row per member.
std::string FormatClusterStatus(const v1::GetClusterStatusResponse& status);

// zshardctl --coordinator HOST:PORT[,...] status [--output table|json]
//   [--tls-ca F] [--tls-cert F --tls-key F] [--timeout-ms N]
// argv[0] is "status"; --coordinator may also follow it. Prints the result
// on stdout; errors are one line on stderr. Returns 0, 2 for usage errors,
// 3 when no leading coordinator can be reached, 1 for other failures.
int RunStatusCommand(const GlobalFlags& global, int argc, char** argv);

}  // namespace zshard::ctl
