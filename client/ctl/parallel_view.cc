// Shared pieces of the model-parallel plan and ledger output.
#include "client/ctl/parallel_view.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/ctl/table.h"
#include "common/status.h"

namespace zshard::ctl {

absl::StatusOr<ParallelPlanAndLedger> PlanAndLedger(
    const plan::ParallelModel& model,
    const plan::ParallelPlanOptions& options) {
  ParallelPlanAndLedger out;
  ZSHARD_ASSIGN_OR_RETURN(out.plan, plan::MakeParallelPlan(model, options));
  ZSHARD_ASSIGN_OR_RETURN(out.ledger,
                          plan::ComputeParallelLedger(model, out.plan));
  return out;
}

std::string ParallelHeader(const std::string& name,
                           const plan::ParallelLedger& ledger) {
  const plan::ParallelSizes& s = ledger.sizes;
  const int d = ledger.data_parallel / std::max(ledger.instances, 1);
  return absl::StrCat(
      "model ", name.empty() ? "(unnamed)" : name, ": ",
      Grouped(ledger.model_params), " params (", Grouped(ledger.slot_params),
      " over the slots) in T x P = ", s.slots(), " slots\n",
      "parallel: tensor ", s.tensor, "  pipeline ", s.pipeline, "  context ",
      s.context, "  world ", ledger.world, " = ", ledger.replicas,
      " replicas x ", s.replica_size(), " workers\n",
      "data-parallel size R x C = ", ledger.data_parallel, "  instances ",
      ledger.instances, "  shard group D = ", d, "\n");
}

std::string SlotRanks(const plan::ParallelPlan& plan, int slot) {
  const int tp = plan::SlotTp(plan.sizes, slot);
  const int pp = plan::SlotPp(plan.sizes, slot);
  auto rank = [&](int dp_rank) {
    return plan::RankOf(
        plan.sizes, plan.world,
        plan::PositionOfDataParallelRank(plan.sizes, tp, pp, dp_rank));
  };
  const int n = plan.data_parallel;
  if (n == 1) return absl::StrCat(rank(0));
  if (n == 2) return absl::StrCat(rank(0), ", ", rank(1));
  return absl::StrCat(rank(0), ", ", rank(1), ", ..., ", rank(n - 1));
}

std::string SlotLabel(const plan::ParallelSizes& sizes, int slot) {
  return absl::StrCat("(tp ", plan::SlotTp(sizes, slot), ", pp ",
                      plan::SlotPp(sizes, slot), ")");
}

nlohmann::ordered_json WorkerPositionJson(const plan::ParallelPlan& plan,
                                          int rank) {
  const plan::Position p = plan::PositionOf(plan.sizes, plan.world, rank);
  return {{"rank", rank},
          {"replica", p.replica},
          {"tp", p.tp},
          {"pp", p.pp},
          {"cp", p.cp},
          {"slot", plan::SlotIndex(plan.sizes, p.tp, p.pp)},
          {"dp_rank", plan::DataParallelRank(plan.sizes, p)}};
}

std::vector<SlotRange> SlotRanges(const plan::ParallelPlan& plan,
                                  const std::vector<plan::WorkerBytes>& workers,
                                  plan::Stage stage) {
  std::vector<SlotRange> out(plan.slots.size());
  std::vector<bool> seen(plan.slots.size(), false);
  for (const plan::WorkerBytes& w : workers) {
    const int64_t b = w.stages[static_cast<int>(stage)].total_bytes;
    SlotRange& r = out[w.slot];
    if (!seen[w.slot]) {
      r = {b, b};
      seen[w.slot] = true;
    }
    r.least = std::min(r.least, b);
    r.most = std::max(r.most, b);
  }
  return out;
}

std::string WorkersBySlotTable(const plan::ParallelPlan& plan,
                               const std::vector<SlotRange>& ranges,
                               const std::string& label) {
  std::string out =
      absl::StrCat("workers by slot (", plan.world,
                   " workers; one row each up to ", kMaxWorkerRows, ")\n");
  Table table({"slot", "tp", "pp", "workers", "ranks",
               absl::StrCat(label, " least"), absl::StrCat(label, " most")});
  table.LeftAlign(4);
  for (size_t s = 0; s < plan.slots.size(); ++s) {
    const int slot = static_cast<int>(s);
    table.AddRow({absl::StrCat(slot),
                  absl::StrCat(plan::SlotTp(plan.sizes, slot)),
                  absl::StrCat(plan::SlotPp(plan.sizes, slot)),
                  absl::StrCat(plan.data_parallel), SlotRanks(plan, slot),
                  HumanBytes(ranges[s].least), HumanBytes(ranges[s].most)});
  }
  return out + table.Render();
}

}  // namespace zshard::ctl
