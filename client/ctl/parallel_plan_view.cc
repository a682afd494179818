// zshardctl plan's tables and JSON for a model-parallel plan.
#include "client/ctl/parallel_plan_view.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "client/ctl/parallel_view.h"
#include "client/ctl/plan_tables.h"
#include "client/ctl/table.h"
#include "common/plan/ledger.h"
#include "common/plan/plan_json.h"
#include "nlohmann/json.hpp"

namespace zshard::ctl {
namespace {

using plan::Stage;

// Each data-parallel rank's window of every bucket, padding included.
int64_t ShardElements(const plan::Plan& p) {
  int64_t n = 0;
  for (const plan::Buffer& buf : p.buffers) {
    for (const plan::Bucket& b : buf.buckets) {
      n += (b.end - b.start) / buf.shard_group_size;
    }
  }
  return n;
}

size_t Buckets(const plan::Plan& p) {
  size_t n = 0;
  for (const plan::Buffer& buf : p.buffers) n += buf.buckets.size();
  return n;
}

int64_t Zero1Bytes(const ParallelPlanView& v, const plan::WorkerPlan& w) {
  return plan::RankStageBytes(v.model->slots[w.slot], v.plan->slots[w.slot],
                              w.dp_rank, Stage::kZero1)
      .total_bytes;
}

std::string SlotTable(const ParallelPlanView& v) {
  Table table({"slot", "tp", "pp", "params", "tensors", "dp size", "buffers",
               "buckets", "shard elements", "ZeRO-1"});
  for (size_t s = 0; s < v.plan->slots.size(); ++s) {
    const int slot = static_cast<int>(s);
    const plan::Plan& p = v.plan->slots[s];
    const plan::ModelSpec& m = v.model->slots[s];
    table.AddRow(
        {absl::StrCat(slot), absl::StrCat(plan::SlotTp(v.plan->sizes, slot)),
         absl::StrCat(plan::SlotPp(v.plan->sizes, slot)), Grouped(m.numel()),
         absl::StrCat(m.params.size()), absl::StrCat(p.world),
         absl::StrCat(p.buffers.size()), absl::StrCat(Buckets(p)),
         Grouped(ShardElements(p)),
         HumanBytes(v.ledger->slots[s].stage(Stage::kZero1).total_bytes)});
  }
  return "per slot: shard elements and ZeRO-1 bytes per data-parallel rank "
         "(the worst one, padding included)\n" +
         table.Render();
}

std::string WorkerTable(const ParallelPlanView& v) {
  Table table({"rank", "replica", "tp", "pp", "cp", "slot", "dp_rank",
               "instance", "shard_rank", "owned elements", "pieces", "ZeRO-1"});
  for (const plan::WorkerPlan& w : v.workers) {
    const Owned owned = OwnedBy(w.shards);
    table.AddRow({absl::StrCat(w.rank), absl::StrCat(w.position.replica),
                  absl::StrCat(w.position.tp), absl::StrCat(w.position.pp),
                  absl::StrCat(w.position.cp), absl::StrCat(w.slot),
                  absl::StrCat(w.dp_rank), absl::StrCat(w.shards.instance),
                  absl::StrCat(w.shards.shard_rank), Grouped(owned.elements),
                  absl::StrCat(owned.pieces), HumanBytes(Zero1Bytes(v, w))});
  }
  return table.Render();
}

std::string OneWorker(const ParallelPlanView& v) {
  const plan::WorkerPlan& w = v.workers[0];
  const plan::Position& p = w.position;
  return absl::StrCat("worker ", w.rank, "  replica ", p.replica, "  tp ", p.tp,
                      "  pp ", p.pp, "  cp ", p.cp, "  slot ", w.slot,
                      "  dp_rank ", w.dp_rank, "  instance ", w.shards.instance,
                      "  shard rank ", w.shards.shard_rank, "  ZeRO-1 ",
                      HumanBytes(Zero1Bytes(v, w)), "\n\n") +
         BufferTables(v.plan->slots[w.slot]) +
         PiecesTable(v.model->slots[w.slot], w.shards);
}

}  // namespace

std::string ParallelPlanTables(const ParallelPlanView& v) {
  std::string out = ParallelHeader(v.name, *v.ledger);
  absl::StrAppend(&out, "plan ", v.plan->hash, "  bucket size ",
                  Grouped(v.plan->slots[0].bucket_size), " elements\n\n");
  if (v.one_rank) return out + OneWorker(v);
  out += SlotTable(v) + "\n";
  if (v.plan->world <= kMaxWorkerRows) return out + WorkerTable(v);
  const std::vector<plan::WorkerBytes> bytes =
      plan::ComputeWorkerBytes(*v.model, *v.plan);
  return out + WorkersBySlotTable(*v.plan,
                                  SlotRanges(*v.plan, bytes, Stage::kZero1),
                                  "ZeRO-1");
}

std::string ParallelPlanJson(const ParallelPlanView& v) {
  const plan::ParallelPlan& pl = *v.plan;
  nlohmann::ordered_json j;
  j["plan_hash"] = pl.hash;
  j["parallel"] = {{"tensor", pl.sizes.tensor},
                   {"pipeline", pl.sizes.pipeline},
                   {"context", pl.sizes.context}};
  j["world"] = pl.world;
  j["replicas"] = pl.replicas;
  j["data_parallel"] = pl.data_parallel;
  j["instances"] = pl.instances;
  j["bucket_size"] = pl.slots[0].bucket_size;
  j["model_params"] = v.ledger->model_params;
  j["slot_params"] = v.ledger->slot_params;
  nlohmann::ordered_json slots = nlohmann::ordered_json::array();
  for (size_t s = 0; s < pl.slots.size(); ++s) {
    const int slot = static_cast<int>(s);
    const plan::Plan& p = pl.slots[s];
    const plan::ModelSpec& m = v.model->slots[s];
    nlohmann::ordered_json js;
    js["slot"] = slot;
    js["tp"] = plan::SlotTp(pl.sizes, slot);
    js["pp"] = plan::SlotPp(pl.sizes, slot);
    js["params"] = m.numel();
    js["tensors"] = m.params.size();
    js["data_parallel"] = p.world;
    js["buckets"] = Buckets(p);
    js["shard_elements"] = ShardElements(p);
    js["zero1_bytes"] = v.ledger->slots[s].stage(Stage::kZero1).total_bytes;
    nlohmann::ordered_json slot_plan =
        nlohmann::ordered_json::parse(plan::PlanToJson(m, p, {}));
    slot_plan.erase("ranks");
    js["plan"] = std::move(slot_plan);
    slots.push_back(std::move(js));
  }
  j["slots"] = std::move(slots);
  nlohmann::ordered_json workers = nlohmann::ordered_json::array();
  for (const plan::WorkerPlan& w : v.workers) {
    nlohmann::ordered_json jw = WorkerPositionJson(pl, w.rank);
    const Owned owned = OwnedBy(w.shards);
    jw["instance"] = w.shards.instance;
    jw["shard_rank"] = w.shards.shard_rank;
    jw["owned_elements"] = owned.elements;
    jw["pieces"] = owned.pieces;
    jw["zero1_bytes"] = Zero1Bytes(v, w);
    if (v.one_rank) {
      const nlohmann::ordered_json rank =
          nlohmann::ordered_json::parse(plan::PlanToJson(
              v.model->slots[w.slot], pl.slots[w.slot], {w.shards}));
      jw["shards"] = rank["ranks"][0]["shards"];
    }
    workers.push_back(std::move(jw));
  }
  j["workers"] = std::move(workers);
  return j.dump();
}

}  // namespace zshard::ctl
