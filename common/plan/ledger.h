// The memory ledger (docs/design.md section 1): bytes per rank of param, grad,
// fp32 master, exp_avg (m) and exp_avg_sq (v) under DDP and ZeRO stages 1-3,
// computed exactly from a plan, beside the seed formulas.
//
// Conventions of the exact figures:
// - Full (unsharded) param and grad buffers are the padded buffers of the
//   plan: numel (padding included) x the param or grad dtype's bytes.
// - Sharded state is the rank's shard of every bucket, padding included
//   (the state is one contiguous window per bucket): (end - start) elements.
// - bf16/fp16 params get an fp32 master (4 bytes per element); fp32 params
//   are their own master, so their master bytes are 0. m and v are fp32 for
//   every param.
// - The reported figures of a stage are those of its worst rank (largest
//   total; the lowest such rank on ties).
// - Expert buffers hold the expert params the spec lists, sharded over
//   D / E ranks: a spec should list one expert-parallel rank's experts
//   (with E > 1, a spec listing every expert overstates expert bytes E-fold).
// - formula_bytes is the seed formula (16P, 4P+12P/N, 2P+14P/N, 16P/N) with
//   P the unpadded parameter count and N = D, divisions rounded down.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "common/plan/model_spec.h"
#include "common/plan/plan.h"

namespace zshard::plan {

enum class Stage { kDdp = 0, kZero1 = 1, kZero2 = 2, kZero3 = 3 };
inline constexpr int kNumStages = 4;

// "ddp", "zero1", "zero2", "zero3".
const char* StageName(Stage stage);

struct StageBytes {
  int worst_rank = 0;
  int64_t param_bytes = 0;
  int64_t grad_bytes = 0;
  int64_t master_bytes = 0;
  int64_t exp_avg_bytes = 0;
  int64_t exp_avg_sq_bytes = 0;
  int64_t total_bytes = 0;
  int64_t formula_bytes = 0;
};

struct Ledger {
  int64_t params = 0;  // P, unpadded
  int world = 1;
  int instances = 1;
  int shard_group_size = 1;  // D = N
  std::array<StageBytes, kNumStages> stages;

  const StageBytes& stage(Stage s) const { return stages[static_cast<int>(s)]; }
};

// The figures of one rank in one stage (formula_bytes included).
// Requires CheckRank(plan, rank) to be OK.
StageBytes RankStageBytes(const ModelSpec& model, const Plan& plan, int rank,
                          Stage stage);

// The ledger of `plan` (made from `model`). InvalidArgument when a byte
// count would overflow int64.
absl::StatusOr<Ledger> ComputeLedger(const ModelSpec& model, const Plan& plan);

// {"params", "world", "instances", "shard_group_size", "stages": {"ddp":
// {"param_bytes", "grad_bytes", "master_bytes", "exp_avg_bytes",
// "exp_avg_sq_bytes", "total_bytes", "formula_bytes"}, "zero1", ...}}.
std::string LedgerToJson(const Ledger& ledger);

}  // namespace zshard::plan
