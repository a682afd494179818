// zshardctl --coordinator ADDR checkpoint list [--output table|json]: the
// job's committed checkpoints (DashboardService.ListCheckpoints), oldest
// first: step, commit time, files, bytes and directory; then the attempts
// that have no manifest (a rank's write failed, still in progress, or found
// damaged), marked incomplete. The offline `checkpoint export` and
// `checkpoint import` (checkpoint_torch_command.cc) are dispatched from
// here.
#include <cstdio>
#include <iostream>
#include <string>

#include "absl/strings/str_cat.h"
#include "client/ctl/commands.h"
#include "client/ctl/model_options.h"
#include "client/ctl/online.h"
#include "client/ctl/online_commands.h"
#include "client/ctl/table.h"
#include "zshard/v1/dashboard_service.grpc.pb.h"

namespace zshard::ctl {
namespace {

constexpr char kUsage[] =
    "usage: zshardctl --coordinator HOST:PORT checkpoint list\n"
    "         [--output table|json] [--tls-ca F] [--tls-cert F --tls-key F]\n"
    "         [--timeout-ms N]\n"
    "       zshardctl checkpoint export DIR --format torch OUT.pt --job "
    "JOB.json\n"
    "       zshardctl checkpoint import IN.pt --format torch --job JOB.json "
    "OUT_DIR\n";

constexpr char kSubcommands[] = "(zshardctl checkpoint list | export | import)";

int FileCount(const v1::ListCheckpointsResponse& resp, int i) {
  return i < resp.file_count_size() ? resp.file_count(i) : 0;
}

}  // namespace

nlohmann::json CheckpointsToJson(const v1::ListCheckpointsResponse& resp) {
  nlohmann::json out = nlohmann::json::array();
  for (int i = 0; i < resp.checkpoints_size(); ++i) {
    const v1::CheckpointManifest& c = resp.checkpoints(i);
    out.push_back({{"step", c.step()},
                   {"adam_step", c.adam_step()},
                   {"time", Rfc3339(c.committed_ms())},
                   {"epoch", c.epoch()},
                   {"world", c.world()},
                   {"instances", c.instances()},
                   {"files", FileCount(resp, i)},
                   {"bytes", c.bytes()},
                   {"dir", c.dir()},
                   {"complete", true}});
    if (c.slot_params_size() > 0) {
      // A model-parallel checkpoint: a slot-S/ dir per slot.
      out.back()["parallel"] = {{"tensor", c.tensor()},
                                {"pipeline", c.pipeline()},
                                {"context", c.context()},
                                {"slots", c.slot_params_size()}};
    }
  }
  // Attempts without a manifest follow, marked incomplete: never restored
  // from.
  for (const v1::CheckpointAttempt& a : resp.incomplete()) {
    out.push_back({{"step", a.step()},
                   {"dir", a.dir()},
                   {"files", a.files_reported()},
                   {"files_expected", a.files_expected()},
                   {"failures", a.failures()},
                   {"complete", false}});
  }
  return out;
}

// The incomplete attempts, marked, after the committed table.
std::string FormatIncomplete(const v1::ListCheckpointsResponse& resp) {
  if (resp.incomplete_size() == 0) return "";
  Table table({"STEP", "STATE", "FILES", "DIR", "WHY"});
  table.LeftAlign(1);
  table.LeftAlign(3);
  table.LeftAlign(4);
  for (const v1::CheckpointAttempt& a : resp.incomplete()) {
    std::string why;
    for (const std::string& f : a.failures()) {
      absl::StrAppend(&why, why.empty() ? "" : "; ", f);
    }
    table.AddRow({absl::StrCat(a.step()),
                  a.failures_size() > 0 ? "INCOMPLETE (failed)"
                                        : "INCOMPLETE (in progress)",
                  absl::StrCat(a.files_reported(), "/", a.files_expected()),
                  a.dir(), why.empty() ? "-" : why});
  }
  return "\nincomplete attempts (no manifest, never restored from):\n" +
         table.Render();
}

std::string FormatCheckpoints(const v1::ListCheckpointsResponse& resp) {
  if (resp.checkpoints_size() == 0) {
    return "no committed checkpoints yet\n" + FormatIncomplete(resp);
  }
  Table table({"STEP", "TIME", "EPOCH", "WORLD", "FILES", "BYTES", "DIR"});
  table.LeftAlign(1);
  table.LeftAlign(6);
  for (int i = 0; i < resp.checkpoints_size(); ++i) {
    const v1::CheckpointManifest& c = resp.checkpoints(i);
    table.AddRow({absl::StrCat(c.step()), Rfc3339(c.committed_ms()),
                  absl::StrCat(c.epoch()), absl::StrCat(c.world()),
                  absl::StrCat(FileCount(resp, i)), Grouped(c.bytes()),
                  c.dir()});
  }
  return table.Render() + FormatIncomplete(resp);
}

int RunCheckpointCommand(const GlobalFlags& global, int argc, char** argv) {
  const std::string sub = argc >= 2 ? argv[1] : "";
  if (sub == "--help" || sub == "help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (sub == "export") {
    return RunCheckpointExportCommand(global, argc - 1, argv + 1);
  }
  if (sub == "import") {
    return RunCheckpointImportCommand(global, argc - 1, argv + 1);
  }
  if (sub != "list") {
    return ReportError(
        "checkpoint",
        absl::InvalidArgumentError(
            sub.empty() || sub.rfind("--", 0) == 0
                ? absl::StrCat("a subcommand is missing ", kSubcommands)
                : absl::StrCat("unknown subcommand '", sub.substr(0, 80), "' ",
                               kSubcommands)));
  }
  absl::StatusOr<OnlineArgs> args =
      ParseOnlineArgs(global, argc - 1, argv + 1, {});
  if (!args.ok()) return ReportError("checkpoint", args.status());
  if (args->parsed.help()) return PrintUsage(kUsage, *args);
  auto coordinators = Connect(*args);
  if (!coordinators.ok()) {
    return ReportError("checkpoint", coordinators.status());
  }
  v1::ListCheckpointsResponse resp;
  grpc::Status s = CallLeader<v1::DashboardService>(
      **coordinators, *args,
      [&](v1::DashboardService::Stub& stub, grpc::ClientContext* context) {
        return stub.ListCheckpoints(context, v1::ListCheckpointsRequest(),
                                    &resp);
      });
  if (!s.ok()) return ReportRpcError("checkpoint", *args, s);
  if (args->json) {
    std::cout << CheckpointsToJson(resp).dump() << std::endl;
  } else {
    std::cout << FormatCheckpoints(resp);
  }
  return 0;
}

}  // namespace zshard::ctl
