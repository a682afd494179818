// zshardctl plan: the buffers, buckets and per-rank shards of a model's
// ZeRO-1 layout, as tables or in the JSON contract.
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "client/ctl/commands.h"
#include "client/ctl/model_options.h"
#include "client/ctl/shared_flags.h"
#include "client/ctl/table.h"
#include "common/plan/plan_json.h"
#include "common/status.h"

namespace zshard::ctl {
namespace {

constexpr char kUsage[] =
    "usage: zshardctl plan (--model FILE | --preset NAME) --world W\n"
    "         [--instances I] [--bucket-size N] [--max-world M]\n"
    "         [--expert-parallel E] [--grad-reduce-in-fp32]\n"
    "         [--pad-for-high-nccl-busbw] [--rank R] [--output table|json]\n";

std::string PlanTables(const plan::ModelSpec& model, const plan::Plan& p,
                       const std::vector<plan::RankPlan>& ranks,
                       bool one_rank) {
  std::string out = absl::StrCat(
      "model ", model.name.empty() ? "(unnamed)" : model.name, ": ",
      Grouped(model.numel()), " params in ", model.params.size(),
      " tensors\nplan ", p.hash, "  world ", p.world, "  instances ",
      p.instances, "  shard group D ", p.shard_group_size, "  bucket size ",
      Grouped(p.bucket_size), " elements\n\n");
  Table buffers({"buffer", "param", "grad", "expert", "group", "numel",
                 "padding", "buckets", "params"});
  for (size_t b = 0; b < p.buffers.size(); ++b) {
    const plan::Buffer& buf = p.buffers[b];
    int64_t unpadded = 0;
    for (const plan::Bucket& k : buf.buckets) unpadded += k.numel_unpadded;
    buffers.AddRow(
        {absl::StrCat(b), plan::DTypeName(buf.key.param_dtype),
         plan::DTypeName(buf.key.grad_dtype), buf.key.expert ? "yes" : "no",
         absl::StrCat(buf.shard_group_size), Grouped(buf.numel),
         Grouped(buf.numel - unpadded), absl::StrCat(buf.buckets.size()),
         absl::StrCat(buf.params.size())});
  }
  out += buffers.Render() + "\n";
  Table buckets(
      {"buffer", "bucket", "start", "end", "unpadded", "shard", "params"});
  for (size_t b = 0; b < p.buffers.size(); ++b) {
    const plan::Buffer& buf = p.buffers[b];
    std::vector<int> count(buf.buckets.size(), 0);
    for (const plan::ParamSlot& s : buf.params) ++count[s.bucket];
    for (size_t k = 0; k < buf.buckets.size(); ++k) {
      const plan::Bucket& bk = buf.buckets[k];
      buckets.AddRow({absl::StrCat(b), absl::StrCat(k), Grouped(bk.start),
                      Grouped(bk.end), Grouped(bk.numel_unpadded),
                      Grouped((bk.end - bk.start) / buf.shard_group_size),
                      absl::StrCat(count[k])});
    }
  }
  out += buckets.Render() + "\n";
  if (one_rank) {
    const plan::RankPlan& r = ranks[0];
    out += absl::StrCat("rank ", r.rank, "  instance ", r.instance,
                        "  shard rank ", r.shard_rank, "\n");
    Table pieces({"buffer", "bucket", "shard", "param", "param elements"});
    for (const plan::Shard& s : r.shards) {
      const std::string window =
          absl::StrCat("[", Grouped(s.start), ", ", Grouped(s.end), ")");
      if (s.pieces.empty()) {
        pieces.AddRow({absl::StrCat(s.buffer), absl::StrCat(s.bucket), window,
                       "(padding)", ""});
      }
      for (const plan::Piece& pc : s.pieces) {
        pieces.AddRow({absl::StrCat(s.buffer), absl::StrCat(s.bucket), window,
                       model.params[pc.param_index].name,
                       absl::StrCat("[", Grouped(pc.param_start), ", ",
                                    Grouped(pc.param_end), ")")});
      }
    }
    return out + pieces.Render();
  }
  Table table({"rank", "instance", "shard_rank", "owned elements", "pieces"});
  for (const plan::RankPlan& r : ranks) {
    int64_t owned = 0;
    size_t pieces = 0;
    for (const plan::Shard& s : r.shards) {
      pieces += s.pieces.size();
      for (const plan::Piece& pc : s.pieces) owned += pc.end - pc.start;
    }
    table.AddRow({absl::StrCat(r.rank), absl::StrCat(r.instance),
                  absl::StrCat(r.shard_rank), Grouped(owned),
                  absl::StrCat(pieces)});
  }
  return out + table.Render();
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
        "online plan from --coordinator is not available; give --model or "
        "--preset");
  }
  ZSHARD_ASSIGN_OR_RETURN(ModelOptions options, ReadModelOptions(parsed));
  ZSHARD_ASSIGN_OR_RETURN(plan::Plan p,
                          plan::MakePlan(options.model, options.plan));
  std::vector<plan::RankPlan> ranks;
  const bool one_rank = parsed.Given(FLAGS_rank);
  if (one_rank) {
    ZSHARD_RETURN_IF_ERROR(CheckRange(FLAGS_rank,
                                      std::numeric_limits<int>::min(),
                                      std::numeric_limits<int>::max()));
    const int64_t rank = absl::GetFlag(FLAGS_rank);
    ZSHARD_RETURN_IF_ERROR(plan::CheckRank(p, static_cast<int>(rank)));
    ranks.push_back(
        plan::MakeRankPlan(options.model, p, static_cast<int>(rank)));
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
