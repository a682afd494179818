// Exact per-rank memory figures from a plan, the seed formulas, and the
// ledger's JSON form.
#include "common/plan/ledger.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace zshard::plan {
namespace {

using Wide = __int128;

struct WideBytes {
  Wide param = 0, grad = 0, master = 0, exp_avg = 0, exp_avg_sq = 0;
  Wide formula = 0;
  Wide total() const { return param + grad + master + exp_avg + exp_avg_sq; }
};

bool Sharded(Stage stage, int what) {
  // what: 0 param, 1 grad, 2 optimizer state (master, m, v).
  switch (stage) {
    case Stage::kDdp:
      return false;
    case Stage::kZero1:
      return what == 2;
    case Stage::kZero2:
      return what >= 1;
    case Stage::kZero3:
      return true;
  }
  return false;
}

Wide Formula(Stage stage, Wide p, Wide n) {
  switch (stage) {
    case Stage::kDdp:
      return 16 * p;
    case Stage::kZero1:
      return 4 * p + 12 * p / n;
    case Stage::kZero2:
      return 2 * p + 14 * p / n;
    case Stage::kZero3:
      return 16 * p / n;
  }
  return 0;
}

WideBytes Compute(const ModelSpec& model, const Plan& plan, int rank,
                  Stage stage) {
  WideBytes w;
  (void)rank;  // every shard of a bucket has the same size
  const int d = plan.shard_group_size;
  for (const Buffer& buffer : plan.buffers) {
    const int group = buffer.shard_group_size;
    Wide owned = 0;
    for (const Bucket& bucket : buffer.buckets) {
      owned += (bucket.end - bucket.start) / group;
    }
    const Wide full = buffer.numel;
    const int pb = DTypeBytes(buffer.key.param_dtype);
    const int gb = DTypeBytes(buffer.key.grad_dtype);
    const bool own_master = buffer.key.param_dtype == DType::kFp32;
    w.param += (Sharded(stage, 0) ? owned : full) * pb;
    w.grad += (Sharded(stage, 1) ? owned : full) * gb;
    const Wide state = Sharded(stage, 2) ? owned : full;
    if (!own_master) w.master += state * 4;
    w.exp_avg += state * 4;
    w.exp_avg_sq += state * 4;
  }
  w.formula = Formula(stage, model.numel(), d);
  return w;
}

bool Fits(Wide v) { return v <= std::numeric_limits<int64_t>::max(); }

StageBytes Narrow(const WideBytes& w, int rank) {
  StageBytes s;
  s.worst_rank = rank;
  s.param_bytes = static_cast<int64_t>(w.param);
  s.grad_bytes = static_cast<int64_t>(w.grad);
  s.master_bytes = static_cast<int64_t>(w.master);
  s.exp_avg_bytes = static_cast<int64_t>(w.exp_avg);
  s.exp_avg_sq_bytes = static_cast<int64_t>(w.exp_avg_sq);
  s.total_bytes = static_cast<int64_t>(w.total());
  s.formula_bytes = static_cast<int64_t>(w.formula);
  return s;
}

}  // namespace

const char* StageName(Stage stage) {
  switch (stage) {
    case Stage::kDdp:
      return "ddp";
    case Stage::kZero1:
      return "zero1";
    case Stage::kZero2:
      return "zero2";
    case Stage::kZero3:
      return "zero3";
  }
  return "unknown";
}

StageBytes RankStageBytes(const ModelSpec& model, const Plan& plan, int rank,
                          Stage stage) {
  return Narrow(Compute(model, plan, rank, stage), rank);
}

absl::StatusOr<Ledger> ComputeLedger(const ModelSpec& model, const Plan& plan) {
  Ledger ledger;
  ledger.params = model.numel();
  ledger.world = plan.world;
  ledger.instances = plan.instances;
  ledger.shard_group_size = plan.shard_group_size;
  for (int s = 0; s < kNumStages; ++s) {
    const Stage stage = static_cast<Stage>(s);
    // Instances replicate one another, so the shard ranks of instance 0
    // cover every distinct figure.
    WideBytes worst;
    int worst_rank = -1;
    for (int r = 0; r < plan.shard_group_size; ++r) {
      WideBytes w = Compute(model, plan, r, stage);
      if (worst_rank < 0 || w.total() > worst.total()) {
        worst = w;
        worst_rank = r;
      }
    }
    if (!Fits(worst.total()) || !Fits(worst.formula)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model too large: ", StageName(stage), " bytes overflow int64"));
    }
    ledger.stages[s] = Narrow(worst, worst_rank);
  }
  return ledger;
}

std::string LedgerToJson(const Ledger& ledger) {
  nlohmann::ordered_json j;
  j["params"] = ledger.params;
  j["world"] = ledger.world;
  j["instances"] = ledger.instances;
  j["shard_group_size"] = ledger.shard_group_size;
  nlohmann::ordered_json stages = nlohmann::ordered_json::object();
  for (int s = 0; s < kNumStages; ++s) {
    const StageBytes& b = ledger.stages[s];
    nlohmann::ordered_json js;
    js["param_bytes"] = b.param_bytes;
    js["grad_bytes"] = b.grad_bytes;
    js["master_bytes"] = b.master_bytes;
    js["exp_avg_bytes"] = b.exp_avg_bytes;
    js["exp_avg_sq_bytes"] = b.exp_avg_sq_bytes;
    js["total_bytes"] = b.total_bytes;
    js["formula_bytes"] = b.formula_bytes;
    js["worst_rank"] = b.worst_rank;
    stages[StageName(static_cast<Stage>(s))] = std::move(js);
  }
  j["stages"] = std::move(stages);
  return j.dump();
}

}  // namespace zshard::plan
