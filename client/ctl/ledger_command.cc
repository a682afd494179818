// zshardctl ledger: bytes per rank of param, grad, fp32 master, m and v for
// DDP and ZeRO stages 1-3, exact (worst rank, padding included) beside the
// seed formulas; a table or the JSON contract. A model-parallel job shows
// them per slot and per worker, with the fit verdict of the worst slot.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "client/ctl/commands.h"
#include "client/ctl/model_options.h"
#include "client/ctl/parallel_ledger_view.h"
#include "client/ctl/parallel_view.h"
#include "client/ctl/shared_flags.h"
#include "client/ctl/table.h"
#include "common/plan/ledger.h"
#include "common/plan/parallel_ledger.h"
#include "common/status.h"
#include "nlohmann/json.hpp"

ABSL_FLAG(double, device_gib, 0,
          "device memory in GiB for the ZeRO-1 fit verdict (default: none)");

namespace zshard::ctl {
namespace {

constexpr char kUsage[] =
    "usage: zshardctl ledger (--model FILE | --preset NAME) --world W\n"
    "         [--tensor T] [--pipeline P] [--context C]\n"
    "         [--instances I] [--bucket-size N] [--max-world M]\n"
    "         [--expert-parallel E] [--grad-reduce-in-fp32]\n"
    "         [--pad-for-high-nccl-busbw] [--device-gib G]\n"
    "         [--output table|json]\n"
    "       zshardctl ledger --job FILE [--world W] [the layout options]\n";

// --device-gib in bytes; 0 when not given. InvalidArgument unless it is a
// positive number of at most 2^32 GiB.
absl::StatusOr<int64_t> DeviceBytes(const ParsedCommandLine& parsed) {
  if (!parsed.Given(FLAGS_device_gib)) return 0;
  const double gib = absl::GetFlag(FLAGS_device_gib);
  if (!std::isfinite(gib) || gib <= 0 || gib > 4294967296.0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--device-gib must be > 0 and <= 2^32 (got ", gib, ")"));
  }
  return static_cast<int64_t>(gib * 1024.0 * 1024.0 * 1024.0);
}

absl::StatusOr<std::string> RunParallel(const ModelOptions& options,
                                        int64_t device_bytes) {
  ZSHARD_ASSIGN_OR_RETURN(
      const ParallelPlanAndLedger computed,
      PlanAndLedger(options.parallel, options.parallel_plan));
  const plan::ParallelPlan& p = computed.plan;
  const plan::ParallelLedger& ledger = computed.ledger;
  ParallelLedgerView view;
  view.name = options.name;
  view.model = &options.parallel;
  view.plan = &p;
  view.ledger = &ledger;
  view.workers = plan::ComputeWorkerBytes(options.parallel, p);
  view.device_bytes = device_bytes;
  if (options.output == OutputFormat::kJson) {
    return ParallelLedgerJson(view) + "\n";
  }
  return ParallelLedgerTables(view);
}

std::string LedgerTable(const plan::ModelSpec& model,
                        const plan::Ledger& ledger) {
  using plan::Stage;
  using plan::StageBytes;
  std::string out = absl::StrCat(
      "model ", model.name.empty() ? "(unnamed)" : model.name,
      ": P = ", Grouped(ledger.params), " params  world ", ledger.world,
      "  instances ", ledger.instances, "  N = D = ", ledger.shard_group_size,
      "\n",
      "bytes per rank (worst rank, padding included; fp32 params are their "
      "own master)\n\n");
  Table table({"state", "DDP", "ZeRO-1", "ZeRO-2", "ZeRO-3"});
  struct Row {
    const char* label;
    int64_t StageBytes::*field;
  };
  const Row rows[] = {{"param", &StageBytes::param_bytes},
                      {"grad", &StageBytes::grad_bytes},
                      {"master fp32", &StageBytes::master_bytes},
                      {"m fp32", &StageBytes::exp_avg_bytes},
                      {"v fp32", &StageBytes::exp_avg_sq_bytes},
                      {"total", &StageBytes::total_bytes},
                      {"seed formula", &StageBytes::formula_bytes}};
  for (const Row& row : rows) {
    std::vector<std::string> cells = {row.label};
    for (const StageBytes& s : ledger.stages) {
      cells.push_back(HumanBytes(s.*row.field));
    }
    table.AddRow(std::move(cells));
  }
  table.AddRow({"formula", "16P", "4P+12P/N", "2P+14P/N", "16P/N"});
  std::vector<std::string> exact = {"total bytes"};
  for (const StageBytes& s : ledger.stages) {
    exact.push_back(Grouped(s.total_bytes));
  }
  table.AddRow(std::move(exact));
  return out + table.Render();
}

absl::StatusOr<std::string> Run(const GlobalFlags& global, int argc,
                                char** argv) {
  FlagList flags = ModelFlagList();
  flags.push_back(FlagOf(FLAGS_device_gib));
  ZSHARD_ASSIGN_OR_RETURN(ParsedCommandLine parsed,
                          ParseCommandFlags(argc, argv, flags));
  if (parsed.help()) return absl::StrCat(kUsage, "\n", FlagsHelp(flags));
  if (!global.coordinator.empty() && !ModelGiven(parsed)) {
    return absl::InvalidArgumentError(
        "online ledger from --coordinator is not available; give --model, "
        "--preset or --job");
  }
  ZSHARD_ASSIGN_OR_RETURN(ModelOptions options, ReadModelOptions(parsed));
  ZSHARD_ASSIGN_OR_RETURN(const int64_t device_bytes, DeviceBytes(parsed));
  if (options.model_parallel) return RunParallel(options, device_bytes);
  ZSHARD_ASSIGN_OR_RETURN(plan::Plan p,
                          plan::MakePlan(options.model, options.plan));
  ZSHARD_ASSIGN_OR_RETURN(plan::Ledger ledger,
                          plan::ComputeLedger(options.model, p));
  if (options.output == OutputFormat::kJson) {
    if (device_bytes > 0) {
      // The single-slot contract, with the verdict only when asked for.
      nlohmann::ordered_json j =
          nlohmann::ordered_json::parse(plan::LedgerToJson(ledger));
      const plan::StageBytes& z1 = ledger.stage(plan::Stage::kZero1);
      j["fit"] = {{"stage", "zero1"},
                  {"rank", z1.worst_rank},
                  {"need_bytes", z1.total_bytes},
                  {"device_bytes", device_bytes},
                  {"headroom_bytes", device_bytes - z1.total_bytes},
                  {"fits", z1.total_bytes <= device_bytes}};
      return j.dump() + "\n";
    }
    return plan::LedgerToJson(ledger) + "\n";
  }
  std::string out = LedgerTable(options.model, ledger);
  if (device_bytes > 0) {
    const plan::StageBytes& z1 = ledger.stage(plan::Stage::kZero1);
    out += "\n" + FitLine(absl::StrCat("rank ", z1.worst_rank), z1.total_bytes,
                          device_bytes);
  }
  return out;
}

}  // namespace

int RunLedgerCommand(const GlobalFlags& global, int argc, char** argv) {
  absl::StatusOr<std::string> out = Run(global, argc, argv);
  if (!out.ok()) return ReportError("ledger", out.status());
  std::fwrite(out->data(), 1, out->size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}

}  // namespace zshard::ctl
