// zshard-loadgen's engine: many simulated worker sessions in one process
// (join, a heartbeat per worker per interval, a plan watch each) against a
// coordinator, using gRPC's callback API so a few threads carry them all.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "grpcpp/channel.h"
#include "nlohmann/json.hpp"
#include "tools/loadgen/latency_stats.h"

namespace zshard::loadgen {

struct LoadOptions {
  // Simulated workers. Default 1000.
  int workers = 1000;
  // Heartbeats after the joins that are not measured: the joins' epoch
  // transitions (every plan update lists every member, so N joins cost
  // O(N^2) bytes of updates) settle meanwhile. Default 0.
  int64_t warmup_ms = 0;
  // Measurement window after the warm-up. Default 30 s.
  int64_t duration_ms = 30000;
  // Each worker's heartbeat period; workers are spread evenly over it.
  // Default 1000 ms.
  int64_t heartbeat_interval_ms = 1000;
  // Threads issuing the joins. Default 16.
  int join_threads = 16;
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
  // CPU use over the measurement window, in percent of one core (-1: not
  // measured).
  double coordinator_cpu_percent = -1;
  double loadgen_cpu_percent = -1;

  nlohmann::json ToJson() const;
  std::string ToText() const;
};

// Runs the load; simulated worker k uses channels[k % channels.size()]
// (separate connections spread the load as real workers would). Unavailable
// when no worker could join; InvalidArgument for no channels.
absl::StatusOr<LoadReport> RunLoad(
    const LoadOptions& options,
    const std::vector<std::shared_ptr<grpc::Channel>>& channels);

}  // namespace zshard::loadgen
