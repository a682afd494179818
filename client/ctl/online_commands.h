// zshardctl's online commands that read the DashboardService of a running
// coordinator (events, explain, top, the live ledger and plan, checkpoint
// list, reshards) or call its AdminService (drain). Exit statuses: 0 ok,
// 2 bad usage, 3 coordinator unreachable or refusing the caller, 1 other
// failures.
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

// zshardctl --coordinator HOST:PORT [--token-file F] drain NAME [--wait
// [--wait-timeout-s N]] [--token-file F] [--output table|json]: marks the
// worker DRAINING (AdminService.DrainWorker, bearer token from the file);
// --wait follows it, with progress on stderr, until it has LEFT (exit 1 if
// it dies or the wait times out). NOT_FOUND (not a live member) exits 2.
// JSON: {"worker", "state": "DRAINING"|"LEFT", "waited_ms" (with --wait)}.
int RunDrainCommand(const GlobalFlags& global, int argc, char** argv);

// zshardctl --coordinator HOST:PORT checkpoint list [--output table|json]
int RunCheckpointCommand(const GlobalFlags& global, int argc, char** argv);
// JSON: an array, oldest first, of {"step", "adam_step", "time" (RFC 3339
// commit time), "epoch", "world", "instances", "files", "bytes", "dir"}.
nlohmann::json CheckpointsToJson(const v1::ListCheckpointsResponse& resp);
std::string FormatCheckpoints(const v1::ListCheckpointsResponse& resp);

// zshardctl --coordinator HOST:PORT reshards [--limit N] [--output ...]
int RunReshardsCommand(const GlobalFlags& global, int argc, char** argv);
// JSON: an array, oldest first, of {"epoch", "base_epoch", "time" (RFC 3339
// proposal time), "reason", "world_before", "world_after", "instances",
// "moves", "bytes_moved", "lower_bound_bytes", "bytes_from_checkpoint",
// "bytes_same_node", "restored_step" (null unless from a checkpoint),
// "duration_ms" (0 while in progress), "outcome"}.
nlohmann::json ReshardsToJson(const v1::GetReshardHistoryResponse& resp);
std::string FormatReshards(const v1::GetReshardHistoryResponse& resp);

// "ACTIVE", "SPARE", ... for a member state ("UNKNOWN" otherwise).
const char* MemberStateName(v1::MemberState state);

}  // namespace zshard::ctl
