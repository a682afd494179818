// zshardctl ledger: bytes per rank of param, grad, fp32 master, m and v for
// DDP and ZeRO stages 1-3, exact (worst rank, padding included) beside the
// seed formulas; a table or the JSON contract.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/ctl/commands.h"
#include "client/ctl/model_options.h"
#include "client/ctl/shared_flags.h"
#include "client/ctl/table.h"
#include "common/plan/ledger.h"
#include "common/status.h"

namespace zshard::ctl {
namespace {

constexpr char kUsage[] =
    "usage: zshardctl ledger (--model FILE | --preset NAME) --world W\n"
    "         [--instances I] [--bucket-size N] [--max-world M]\n"
    "         [--expert-parallel E] [--grad-reduce-in-fp32]\n"
    "         [--pad-for-high-nccl-busbw] [--output table|json]\n";

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
  const FlagList flags = ModelFlagList();
  ZSHARD_ASSIGN_OR_RETURN(ParsedCommandLine parsed,
                          ParseCommandFlags(argc, argv, flags));
  if (parsed.help()) return absl::StrCat(kUsage, "\n", FlagsHelp(flags));
  if (!global.coordinator.empty() && !ModelGiven(parsed)) {
    return absl::InvalidArgumentError(
        "online ledger from --coordinator is not available; give --model or "
        "--preset");
  }
  ZSHARD_ASSIGN_OR_RETURN(ModelOptions options, ReadModelOptions(parsed));
  ZSHARD_ASSIGN_OR_RETURN(plan::Plan p,
                          plan::MakePlan(options.model, options.plan));
  ZSHARD_ASSIGN_OR_RETURN(plan::Ledger ledger,
                          plan::ComputeLedger(options.model, p));
  if (options.output == OutputFormat::kJson) {
    return plan::LedgerToJson(ledger) + "\n";
  }
  return LedgerTable(options.model, ledger);
}

}  // namespace

int RunLedgerCommand(const GlobalFlags& global, int argc, char** argv) {
  absl::StatusOr<std::string> out = Run(global, argc, argv);
  if (!out.ok()) return ReportError("ledger", out.status());
  std::fwrite(out->data(), 1, out->size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}

}  // namespace zshard::ctl
