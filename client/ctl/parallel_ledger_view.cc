// zshardctl ledger's tables and JSON for a model-parallel plan.
#include "client/ctl/parallel_ledger_view.h"

#include "absl/strings/str_cat.h"
#include "client/ctl/parallel_view.h"
#include "client/ctl/table.h"
#include "common/plan/ledger.h"
#include "nlohmann/json.hpp"

namespace zshard::ctl {
namespace {

using plan::Stage;
using plan::StageBytes;

constexpr const char* kStageLabels[] = {"DDP", "ZeRO-1", "ZeRO-2", "ZeRO-3"};

std::string SlotTable(const ParallelLedgerView& v) {
  Table table({"slot", "tp", "pp", "params", "param", "grad", "master fp32",
               "m fp32", "v fp32", "ZeRO-1", "DDP", "ZeRO-2", "ZeRO-3"});
  for (size_t s = 0; s < v.ledger->slots.size(); ++s) {
    const int slot = static_cast<int>(s);
    const plan::Ledger& l = v.ledger->slots[s];
    const StageBytes& z1 = l.stage(Stage::kZero1);
    table.AddRow(
        {absl::StrCat(slot), absl::StrCat(plan::SlotTp(v.ledger->sizes, slot)),
         absl::StrCat(plan::SlotPp(v.ledger->sizes, slot)), Grouped(l.params),
         HumanBytes(z1.param_bytes), HumanBytes(z1.grad_bytes),
         HumanBytes(z1.master_bytes), HumanBytes(z1.exp_avg_bytes),
         HumanBytes(z1.exp_avg_sq_bytes), HumanBytes(z1.total_bytes),
         HumanBytes(l.stage(Stage::kDdp).total_bytes),
         HumanBytes(l.stage(Stage::kZero2).total_bytes),
         HumanBytes(l.stage(Stage::kZero3).total_bytes)});
  }
  return "per slot: bytes of its worst data-parallel rank (padding included; "
         "fp32 params are their own master); param to v are ZeRO-1's\n" +
         table.Render();
}

std::string WorstTable(const ParallelLedgerView& v) {
  Table table({"stage", "worst slot", "tp", "pp", "worker", "total",
               "total bytes", "seed formula"});
  for (int st = 0; st < plan::kNumStages; ++st) {
    const int slot = v.ledger->worst_slot[st];
    const StageBytes& b = v.ledger->worst(static_cast<Stage>(st));
    table.AddRow({kStageLabels[st], absl::StrCat(slot),
                  absl::StrCat(plan::SlotTp(v.ledger->sizes, slot)),
                  absl::StrCat(plan::SlotPp(v.ledger->sizes, slot)),
                  absl::StrCat(v.ledger->worst_worker[st]),
                  HumanBytes(b.total_bytes), Grouped(b.total_bytes),
                  HumanBytes(b.formula_bytes)});
  }
  return "the worst worker of each stage\n" + table.Render();
}

std::string WorkerTable(const ParallelLedgerView& v) {
  Table table({"rank", "replica", "tp", "pp", "cp", "slot", "dp_rank", "DDP",
               "ZeRO-1", "ZeRO-2", "ZeRO-3"});
  for (const plan::WorkerBytes& w : v.workers) {
    const plan::Position p =
        plan::PositionOf(v.plan->sizes, v.plan->world, w.rank);
    std::vector<std::string> row = {
        absl::StrCat(w.rank),   absl::StrCat(p.replica), absl::StrCat(p.tp),
        absl::StrCat(p.pp),     absl::StrCat(p.cp),      absl::StrCat(w.slot),
        absl::StrCat(w.dp_rank)};
    for (const StageBytes& s : w.stages)
      row.push_back(HumanBytes(s.total_bytes));
    table.AddRow(std::move(row));
  }
  return table.Render();
}

}  // namespace

std::string FitLine(const std::string& where, int64_t need_bytes,
                    int64_t device_bytes) {
  std::string out = absl::StrCat("fit: ZeRO-1's worst worker is ", where, ": ",
                                 HumanBytes(need_bytes), " per worker; ");
  if (device_bytes <= 0) {
    return out + "give --device-gib G for a verdict\n";
  }
  const int64_t headroom = device_bytes - need_bytes;
  if (headroom >= 0) {
    return absl::StrCat(out, "fits a ", HumanBytes(device_bytes),
                        " device with ", HumanBytes(headroom), " to spare\n");
  }
  return absl::StrCat(out, "does not fit a ", HumanBytes(device_bytes),
                      " device (", HumanBytes(-headroom), " short)\n");
}

std::string ParallelLedgerTables(const ParallelLedgerView& v) {
  std::string out = ParallelHeader(v.name, *v.ledger) + "\n";
  out += SlotTable(v) + "\n" + WorstTable(v) + "\n";
  if (v.plan->world <= kMaxWorkerRows) {
    out += "bytes per worker\n" + WorkerTable(v);
  } else {
    out += WorkersBySlotTable(
        *v.plan, SlotRanges(*v.plan, v.workers, Stage::kZero1), "ZeRO-1");
  }
  const plan::FitVerdict fit =
      plan::CheckFit(*v.ledger, Stage::kZero1, v.device_bytes);
  return out + "\n" +
         FitLine(absl::StrCat("rank ", fit.worker, " in slot ", fit.slot, " ",
                              SlotLabel(v.ledger->sizes, fit.slot)),
                 fit.need_bytes, v.device_bytes);
}

std::string ParallelLedgerJson(const ParallelLedgerView& v) {
  nlohmann::ordered_json j =
      nlohmann::ordered_json::parse(plan::ParallelLedgerToJson(*v.ledger));
  j["model"] = v.name;
  nlohmann::ordered_json workers = nlohmann::ordered_json::array();
  for (const plan::WorkerBytes& w : v.workers) {
    nlohmann::ordered_json jw = WorkerPositionJson(*v.plan, w.rank);
    nlohmann::ordered_json totals = nlohmann::ordered_json::object();
    for (int st = 0; st < plan::kNumStages; ++st) {
      totals[plan::StageName(static_cast<Stage>(st))] =
          w.stages[st].total_bytes;
    }
    jw["total_bytes"] = std::move(totals);
    workers.push_back(std::move(jw));
  }
  j["workers"] = std::move(workers);
  const plan::FitVerdict fit =
      plan::CheckFit(*v.ledger, Stage::kZero1, v.device_bytes);
  nlohmann::ordered_json jf;
  jf["stage"] = "zero1";
  jf["slot"] = fit.slot;
  jf["tp"] = plan::SlotTp(v.ledger->sizes, fit.slot);
  jf["pp"] = plan::SlotPp(v.ledger->sizes, fit.slot);
  jf["worker"] = fit.worker;
  jf["need_bytes"] = fit.need_bytes;
  if (v.device_bytes > 0) {
    jf["device_bytes"] = fit.device_bytes;
    jf["headroom_bytes"] = fit.headroom_bytes;
    jf["fits"] = fit.fits;
  } else {
    jf["device_bytes"] = nullptr;
    jf["headroom_bytes"] = nullptr;
    jf["fits"] = nullptr;
  }
  j["fit"] = std::move(jf);
  return j.dump();
}

}  // namespace zshard::ctl
