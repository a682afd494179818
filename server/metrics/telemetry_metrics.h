// Per-rank Prometheus gauges from the coordinator's telemetry: step,
// step time by phase, bytes/s, memory by category, loss and grad norm,
// labelled rank, instance and worker.
#pragma once

#include <string>

#include "server/membership/membership.h"
#include "server/telemetry/telemetry_store.h"

namespace zshard::server {

// Prometheus text (format 0.0.4) for the live workers of `view` that have
// telemetry in `telemetry`. Every family has HELP and TYPE lines, even when
// empty.
std::string RenderTelemetryMetrics(const ClusterView& view,
                                   TelemetryStore* telemetry);

// `value` escaped for a label value (backslash, quote, newline).
std::string EscapeLabelValue(const std::string& value);

}  // namespace zshard::server
