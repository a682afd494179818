// zshardctl's online commands that read the DashboardService of a running
// coordinator: events, explain and the live ledger. Exit statuses: 0 ok,
// 2 bad usage, 3 coordinator unreachable, 1 other failures.
#pragma once

#include <string>

#include "client/ctl/commands.h"
#include "nlohmann/json.hpp"
#include "zshard/v1/dashboard_service.pb.h"

namespace zshard::ctl {

// zshardctl --coordinator HOST:PORT events [--follow] [--output table|json]
// JSON: an array of {"time": RFC3339, "epoch", "kind", "reason", "seq"},
// oldest first; with --follow one such object per line, as they come.
int RunEventsCommand(const GlobalFlags& global, int argc, char** argv);

// zshardctl --coordinator HOST:PORT explain [--output table|json]
int RunExplainCommand(const GlobalFlags& global, int argc, char** argv);

// zshardctl ledger: online (RunOnlineLedger) when --coordinator is given
// without --model or --preset, else the offline RunLedgerCommand.
int RunLedgerAnyCommand(const GlobalFlags& global, int argc, char** argv);
int RunOnlineLedger(const GlobalFlags& global, int argc, char** argv);

// zshardctl --coordinator HOST:PORT top [--once] [--interval-ms N]: a
// refreshing per-member view; colours and in-place frames on a terminal.
int RunTopCommand(const GlobalFlags& global, int argc, char** argv);
// One frame of top (ANSI colours by state when `colour`).
std::string RenderTopFrame(const v1::GetClusterStatusResponse& status,
                           const v1::GetTelemetryResponse& telemetry,
                           bool colour);

// zshardctl plan: online (the committed plan; --rank, --param NAME
// [--begin A --end B], --bucket K [--buffer F]) when --coordinator is
// given without --model or --preset, else the offline RunPlanCommand.
int RunPlanAnyCommand(const GlobalFlags& global, int argc, char** argv);

// The JSON contract: {"stage": "zero1", "epoch", "world", "instances",
// "ranks": [{"rank", "worker", "worker_id", "predicted_bytes",
// "measured_bytes" (null without telemetry), "comm_bytes", "matches",
// "categories": {"param": {"predicted", "measured"}, "grad", "master",
// "exp_avg", "exp_avg_sq"}}]}.
nlohmann::json LiveLedgerToJson(const v1::GetLedgerResponse& ledger);
// A table per rank; ranks whose measured bytes differ are flagged.
std::string FormatLiveLedger(const v1::GetLedgerResponse& ledger);

}  // namespace zshard::ctl
