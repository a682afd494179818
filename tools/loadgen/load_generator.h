// zshard-loadgen's engine: many simulated worker sessions in one process
// (join, a heartbeat per worker per interval, a plan watch each) against a
// coordinator, using gRPC's callback API so a few threads carry them all:
// one scheduler thread sends the heartbeats, gRPC's callback threads take
// the replies and the plan updates, so 8,192 workers cost a few threads.
// With several coordinators, joins, heartbeats, plan watches and leaves
// follow the leader (common/net/leader_follower.h).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/net/leader_follower.h"
#include "nlohmann/json.hpp"
#include "tools/loadgen/latency_stats.h"

namespace zshard::loadgen {

struct LoadOptions {
  // Simulated workers. Default 1000.
  int workers = 1000;
  // Heartbeats after the joins that are not measured: the join storm's
  // transitions settle meanwhile (reported as warmup_p99_ms). Default 0.
  int64_t warmup_ms = 0;
  // Measurement window after the warm-up. Default 30 s.
  int64_t duration_ms = 30000;
  // Each worker's heartbeat period; workers are spread evenly over it.
  // Default 2000 ms.
  int64_t heartbeat_ms = 2000;
  // Simulated workers that stop heartbeating (and watching) when the
  // measurement starts, as if killed at once; the others must survive.
  // Default 0.
  int kill = 0;
  // Joins in flight at once (callback-API calls; a completion starts the
  // next). Default 256.
  int joins_in_flight = 256;
  // Worker names are prefix + index. Default "loadgen-".
  std::string name_prefix = "loadgen-";
  // Open a WatchPlan stream per worker and ack transitions. Default true.
  bool watch_plans = true;
  // Leave at the end so the coordinator does not wait for leases. Default
  // true.
  bool leave = true;
  // The coordinator's pid for its CPU use (0: not measured).
  pid_t coordinator_pid = 0;
};

struct LoadReport {
  int workers = 0;  // asked for
  int workers_joined = 0;
  int64_t join_failures = 0;
  double join_seconds = 0;
  double duration_seconds = 0;
  int64_t heartbeats_ok = 0;
  int64_t heartbeats_failed = 0;
  // Heartbeats sent in the measurement window, and in the warm-up.
  LatencySummary latency;
  LatencySummary warmup_latency;
  double warmup_seconds = 0;
  int64_t plan_updates = 0;
  int64_t acks = 0;
  int64_t ack_failures = 0;
  // Simulated workers (not killed) whose heartbeat the coordinator refused
  // as DEAD, fenced or unknown while they were heartbeating.
  int64_t fenced = 0;
  // Proposals the coordinator made from before the joins to the end of the
  // measurement (epoch numbers it used; -1: not known).
  int64_t proposals = -1;
  // CPU use over the measurement window, in percent of one core (-1: not
  // measured).
  double coordinator_cpu_percent = -1;
  double loadgen_cpu_percent = -1;

  // {"workers", "joined", "join_seconds", "heartbeats_ok",
  // "heartbeats_failed", "p50_ms", "p99_ms", "warmup_p99_ms", "fenced",
  // "proposals", "coordinator_cpu_percent", "loadgen_cpu_percent"}.
  nlohmann::json ToJson() const;
  std::string ToText() const;
};

// Runs the load; simulated worker k uses connections[k % size] (separate
// connections spread the load as real workers would), each a follower of
// the coordinators' leader: a call refused by a standby or lost with its
// coordinator moves that connection, a join is retried there, and the plan
// watches of its workers are opened there anew at their next heartbeat.
// Heartbeats go on heartbeat_connections[k % size] when given: a real
// worker's connection carries its own plan updates only, while one shared
// by a thousand simulated workers would hold each heartbeat's answer
// behind a thousand plan updates. Unavailable when no worker could join;
// InvalidArgument for no connections.
absl::StatusOr<LoadReport> RunLoad(
    const LoadOptions& options,
    const std::vector<std::shared_ptr<net::LeaderFollower>>& connections,
    const std::vector<std::shared_ptr<net::LeaderFollower>>&
        heartbeat_connections = {});

}  // namespace zshard::loadgen
