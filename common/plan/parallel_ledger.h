// The memory ledger of a model-parallel plan: the single-slot ledger
// (ledger.h) of every slot over its data-parallel domain, each worker's
// figures, the worst slot per stage, and whether the worst worker fits a
// device of a given size.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/plan/ledger.h"
#include "common/plan/parallel_plan.h"

namespace zshard::plan {

struct ParallelLedger {
  ParallelSizes sizes;
  int world = 1;
  int replicas = 1;
  int data_parallel = 1;  // R * C
  int instances = 1;
  // Elements over every slot (one replica's params, a tp_replicated param
  // once per tensor rank), and the model's own count (tp_replicated params
  // once per pipeline stage).
  int64_t slot_params = 0;
  int64_t model_params = 0;
  std::vector<Ledger> slots;  // by SlotIndex; ComputeLedger of each slot
  // Per stage: the slot whose worst rank has the largest total (the lowest
  // slot index on ties) and that rank as a worker rank of the world.
  std::array<int, kNumStages> worst_slot{};
  std::array<int, kNumStages> worst_worker{};

  const StageBytes& worst(Stage s) const {
    return slots[worst_slot[static_cast<int>(s)]].stage(s);
  }
};

// One worker's figures in every stage.
struct WorkerBytes {
  int rank = 0;
  int slot = 0;
  int dp_rank = 0;
  std::array<StageBytes, kNumStages> stages;  // worst_rank = dp_rank
};

// The ledger of `plan` (made from `model`). InvalidArgument when a byte
// count would overflow int64.
absl::StatusOr<ParallelLedger> ComputeParallelLedger(const ParallelModel& model,
                                                     const ParallelPlan& plan);

// Every worker's figures, by rank. Requires `plan` made from `model`.
std::vector<WorkerBytes> ComputeWorkerBytes(const ParallelModel& model,
                                            const ParallelPlan& plan);

// Whether a stage's worst worker (in the worst slot) fits `device_bytes`.
struct FitVerdict {
  bool fits = false;
  int slot = 0;                // the worst slot
  int worker = 0;              // its worst worker rank
  int64_t need_bytes = 0;      // that worker's total
  int64_t device_bytes = 0;    // as given
  int64_t headroom_bytes = 0;  // device_bytes - need_bytes (may be < 0)
};

FitVerdict CheckFit(const ParallelLedger& ledger, Stage stage,
                    int64_t device_bytes);

// {"parallel": {"tensor", "pipeline", "context"}, "world", "replicas",
//  "data_parallel", "instances", "slot_params", "model_params",
//  "worst": {"ddp": {"slot", "worker"}, ...}, "slots": [{"tp", "pp",
//  "ledger": LedgerToJson's object}]}.
std::string ParallelLedgerToJson(const ParallelLedger& ledger);

}  // namespace zshard::plan
