// zshardctl plan: the buffers, buckets and per-rank shards of a model's
// ZeRO-1 layout, as tables or in the JSON contract; for a model-parallel
// job, per slot and per worker.
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "client/ctl/commands.h"
#include "client/ctl/model_options.h"
#include "client/ctl/parallel_plan_view.h"
#include "client/ctl/parallel_view.h"
#include "client/ctl/plan_tables.h"
#include "client/ctl/shared_flags.h"
#include "client/ctl/table.h"
#include "common/plan/parallel_ledger.h"
#include "common/plan/plan_json.h"
#include "common/status.h"

namespace zshard::ctl {
namespace {

constexpr char kUsage[] =
    "usage: zshardctl plan (--model FILE | --preset NAME) --world W\n"
    "         [--tensor T] [--pipeline P] [--context C]\n"
    "         [--instances I] [--bucket-size N] [--max-world M]\n"
    "         [--expert-parallel E] [--grad-reduce-in-fp32]\n"
    "         [--pad-for-high-nccl-busbw] [--rank R] [--output table|json]\n"
    "       zshardctl plan --job FILE [--world W] [the layout options]\n"
    "         [--rank R] [--output table|json]\n";

std::string PlanTables(const plan::ModelSpec& model, const plan::Plan& p,
                       const std::vector<plan::RankPlan>& ranks,
                       bool one_rank) {
  std::string out = absl::StrCat(
      "model ", model.name.empty() ? "(unnamed)" : model.name, ": ",
      Grouped(model.numel()), " params in ", model.params.size(),
      " tensors\nplan ", p.hash, "  world ", p.world, "  instances ",
      p.instances, "  shard group D ", p.shard_group_size, "  bucket size ",
      Grouped(p.bucket_size), " elements\n\n");
  out += BufferTables(p);
  if (one_rank) {
    const plan::RankPlan& r = ranks[0];
    out += absl::StrCat("rank ", r.rank, "  instance ", r.instance,
                        "  shard rank ", r.shard_rank, "\n");
    return out + PiecesTable(model, r);
  }
  Table table({"rank", "instance", "shard_rank", "owned elements", "pieces"});
  for (const plan::RankPlan& r : ranks) {
    const Owned owned = OwnedBy(r);
    table.AddRow({absl::StrCat(r.rank), absl::StrCat(r.instance),
                  absl::StrCat(r.shard_rank), Grouped(owned.elements),
                  absl::StrCat(owned.pieces)});
  }
  return out + table.Render();
}

// --rank R as an int (the caller checks it against the world).
absl::StatusOr<int> RankFlag() {
  ZSHARD_RETURN_IF_ERROR(CheckRange(FLAGS_rank, std::numeric_limits<int>::min(),
                                    std::numeric_limits<int>::max()));
  return static_cast<int>(absl::GetFlag(FLAGS_rank));
}

absl::StatusOr<std::string> RunParallel(const ModelOptions& options,
                                        bool one_rank) {
  ZSHARD_ASSIGN_OR_RETURN(
      const ParallelPlanAndLedger computed,
      PlanAndLedger(options.parallel, options.parallel_plan));
  const plan::ParallelPlan& p = computed.plan;
  const plan::ParallelLedger& ledger = computed.ledger;
  ParallelPlanView view;
  view.name = options.name;
  view.model = &options.parallel;
  view.plan = &p;
  view.ledger = &ledger;
  view.one_rank = one_rank;
  if (one_rank) {
    ZSHARD_ASSIGN_OR_RETURN(const int rank, RankFlag());
    ZSHARD_RETURN_IF_ERROR(plan::CheckWorkerRank(p, rank));
    view.workers.push_back(plan::MakeWorkerPlan(options.parallel, p, rank));
  } else {
    for (int r = 0; r < p.world; ++r) {
      view.workers.push_back(plan::MakeWorkerPlan(options.parallel, p, r));
    }
  }
  if (options.output == OutputFormat::kJson) {
    return ParallelPlanJson(view) + "\n";
  }
  return ParallelPlanTables(view);
}

absl::StatusOr<std::string> Run(const GlobalFlags& global, int argc,
                                char** argv) {
  FlagList flags = ModelFlagList();
  flags.push_back(FlagOf(FLAGS_rank));
  ZSHARD_ASSIGN_OR_RETURN(ParsedCommandLine parsed,
                          ParseCommandFlags(argc, argv, flags));
  if (parsed.help()) return absl::StrCat(kUsage, "\n", FlagsHelp(flags));
  if (!global.coordinator.empty() && !ModelGiven(parsed)) {
    return absl::InvalidArgumentError(
        "online plan from --coordinator is not available; give --model, "
        "--preset or --job");
  }
  ZSHARD_ASSIGN_OR_RETURN(ModelOptions options, ReadModelOptions(parsed));
  if (options.model_parallel) {
    return RunParallel(options, parsed.Given(FLAGS_rank));
  }
  ZSHARD_ASSIGN_OR_RETURN(plan::Plan p,
                          plan::MakePlan(options.model, options.plan));
  std::vector<plan::RankPlan> ranks;
  const bool one_rank = parsed.Given(FLAGS_rank);
  if (one_rank) {
    ZSHARD_ASSIGN_OR_RETURN(const int rank, RankFlag());
    ZSHARD_RETURN_IF_ERROR(plan::CheckRank(p, rank));
    ranks.push_back(plan::MakeRankPlan(options.model, p, rank));
  } else {
    for (int r = 0; r < p.world; ++r) {
      ranks.push_back(plan::MakeRankPlan(options.model, p, r));
    }
  }
  if (options.output == OutputFormat::kJson) {
    return plan::PlanToJson(options.model, p, ranks) + "\n";
  }
  return PlanTables(options.model, p, ranks, one_rank);
}

}  // namespace

int RunPlanCommand(const GlobalFlags& global, int argc, char** argv) {
  absl::StatusOr<std::string> out = Run(global, argc, argv);
  if (!out.ok()) return ReportError("plan", out.status());
  std::fwrite(out->data(), 1, out->size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}

}  // namespace zshard::ctl
