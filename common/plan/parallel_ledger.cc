// The model-parallel ledger: ComputeLedger per slot, the worst slot, each
// worker's figures and the fit verdict.
#include "common/plan/parallel_ledger.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace zshard::plan {
namespace {

// The world rank of data-parallel rank `dp_rank` of slot `slot`.
int WorkerOf(const ParallelPlan& plan, int slot, int dp_rank) {
  const Position p = PositionOfDataParallelRank(
      plan.sizes, SlotTp(plan.sizes, slot), SlotPp(plan.sizes, slot), dp_rank);
  return RankOf(plan.sizes, plan.world, p);
}

}  // namespace

absl::StatusOr<ParallelLedger> ComputeParallelLedger(const ParallelModel& model,
                                                     const ParallelPlan& plan) {
  ParallelLedger l;
  l.sizes = plan.sizes;
  l.world = plan.world;
  l.replicas = plan.replicas;
  l.data_parallel = plan.data_parallel;
  l.instances = plan.instances;
  for (size_t s = 0; s < plan.slots.size(); ++s) {
    const ModelSpec& spec = model.slots[s];
    absl::StatusOr<Ledger> ledger = ComputeLedger(spec, plan.slots[s]);
    if (!ledger.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("slot (tp ", SlotTp(plan.sizes, static_cast<int>(s)),
                       ", pp ", SlotPp(plan.sizes, static_cast<int>(s)),
                       "): ", ledger.status().message()));
    }
    const bool first_tp = SlotTp(plan.sizes, static_cast<int>(s)) == 0;
    for (const ParamSpec& p : spec.params) {
      l.slot_params += p.numel();
      if (CountsInGradNorm(p, first_tp ? 0 : 1)) l.model_params += p.numel();
    }
    l.slots.push_back(*std::move(ledger));
  }
  for (int st = 0; st < kNumStages; ++st) {
    int worst = 0;
    for (size_t s = 1; s < l.slots.size(); ++s) {
      if (l.slots[s].stages[st].total_bytes >
          l.slots[worst].stages[st].total_bytes) {
        worst = static_cast<int>(s);
      }
    }
    l.worst_slot[st] = worst;
    l.worst_worker[st] =
        WorkerOf(plan, worst, l.slots[worst].stages[st].worst_rank);
  }
  return l;
}

std::vector<WorkerBytes> ComputeWorkerBytes(const ParallelModel& model,
                                            const ParallelPlan& plan) {
  std::vector<WorkerBytes> out;
  out.reserve(plan.world);
  for (int r = 0; r < plan.world; ++r) {
    WorkerBytes w;
    w.rank = r;
    const Position p = PositionOf(plan.sizes, plan.world, r);
    w.slot = SlotIndex(plan.sizes, p.tp, p.pp);
    w.dp_rank = DataParallelRank(plan.sizes, p);
    for (int st = 0; st < kNumStages; ++st) {
      w.stages[st] = RankStageBytes(model.slots[w.slot], plan.slots[w.slot],
                                    w.dp_rank, static_cast<Stage>(st));
    }
    out.push_back(w);
  }
  return out;
}

FitVerdict CheckFit(const ParallelLedger& ledger, Stage stage,
                    int64_t device_bytes) {
  FitVerdict v;
  const int st = static_cast<int>(stage);
  v.slot = ledger.worst_slot[st];
  v.worker = ledger.worst_worker[st];
  v.need_bytes = ledger.worst(stage).total_bytes;
  v.device_bytes = device_bytes;
  v.headroom_bytes = device_bytes - v.need_bytes;
  v.fits = v.need_bytes <= device_bytes;
  return v;
}

std::string ParallelLedgerToJson(const ParallelLedger& ledger) {
  nlohmann::ordered_json j;
  j["parallel"] = {{"tensor", ledger.sizes.tensor},
                   {"pipeline", ledger.sizes.pipeline},
                   {"context", ledger.sizes.context}};
  j["world"] = ledger.world;
  j["replicas"] = ledger.replicas;
  j["data_parallel"] = ledger.data_parallel;
  j["instances"] = ledger.instances;
  j["slot_params"] = ledger.slot_params;
  j["model_params"] = ledger.model_params;
  nlohmann::ordered_json worst = nlohmann::ordered_json::object();
  for (int st = 0; st < kNumStages; ++st) {
    worst[StageName(static_cast<Stage>(st))] = {
        {"slot", ledger.worst_slot[st]}, {"worker", ledger.worst_worker[st]}};
  }
  j["worst"] = std::move(worst);
  nlohmann::ordered_json slots = nlohmann::ordered_json::array();
  for (size_t s = 0; s < ledger.slots.size(); ++s) {
    nlohmann::ordered_json js;
    js["tp"] = SlotTp(ledger.sizes, static_cast<int>(s));
    js["pp"] = SlotPp(ledger.sizes, static_cast<int>(s));
    js["ledger"] = nlohmann::ordered_json::parse(LedgerToJson(ledger.slots[s]));
    slots.push_back(std::move(js));
  }
  j["slots"] = std::move(slots);
  return j.dump();
}

}  // namespace zshard::plan
