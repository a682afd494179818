// The model-parallel plan (docs/design.md section 13): one single-slot plan
// (MakePlan) per slot (tp, pp), each over that slot's data-parallel domain
// of R * C ranks split into I instances, plus where every worker rank sits
// and the shard ranges it owns. Pure and deterministic, like MakePlan.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/plan/model_spec.h"
#include "common/plan/parallel.h"
#include "common/plan/plan.h"

namespace zshard::plan {

// A model-parallel model: one spec per slot, indexed by SlotIndex (tp + T *
// pp), each in its slot's own registration order.
struct ParallelModel {
  ParallelSizes sizes;
  std::vector<ModelSpec> slots;  // sizes.slots() of them

  const ModelSpec& slot(int tp, int pp) const {
    return slots[SlotIndex(sizes, tp, pp)];
  }
};

// OK when sizes are >= 1, there is one valid spec (ValidateModelSpec) per
// slot; else InvalidArgument naming the slot ("slot (tp 1, pp 0): ...").
absl::Status ValidateParallelModel(const ParallelModel& model);

struct ParallelPlanOptions {
  int world = 1;      // W: a multiple of T * P * C
  int instances = 1;  // I: divides R * C, the data-parallel size
  // Every slot's layout. max_world here is the job's largest data-parallel
  // size (R * C at the job's max world), which fixes the default bucket
  // size as MakePlan's max_world does; 0 means "this plan's R * C".
  LayoutOptions layout;
};

struct ParallelPlan {
  ParallelSizes sizes;
  int world = 1;            // W
  int replicas = 1;         // R = W / (T * P * C)
  int data_parallel = 1;    // R * C
  int instances = 1;        // I
  std::vector<Plan> slots;  // by SlotIndex; each with world R * C
  std::string hash;         // hex digest of every input, stable
};

// One worker rank's place in a model-parallel plan.
struct WorkerPlan {
  int rank = 0;
  Position position;
  int slot = 0;     // SlotIndex(position.tp, position.pp)
  int dp_rank = 0;  // DataParallelRank(position): its rank in slot's plan
  // MakeRankPlan(slot model, slot plan, dp_rank): rank, instance and
  // shard_rank inside the slot's data-parallel domain, and the shards.
  RankPlan shards;
};

// The single-slot options of every slot: world R * C, instances I.
PlanOptions SlotPlanOptions(const ParallelSizes& sizes,
                            const ParallelPlanOptions& options);

// Computes the plan by calling MakePlan for each slot. InvalidArgument
// (one line, naming the slot where it is one slot's) when the model is
// invalid, W is not a multiple of T * P * C or I does not divide R * C, or
// a slot's MakePlan fails.
absl::StatusOr<ParallelPlan> MakeParallelPlan(
    const ParallelModel& model, const ParallelPlanOptions& options);

// Worker `rank`'s plan. Requires 0 <= rank < plan.world (CheckWorkerRank)
// and `plan` made from `model`.
WorkerPlan MakeWorkerPlan(const ParallelModel& model, const ParallelPlan& plan,
                          int rank);

// OK when 0 <= rank < plan.world, else InvalidArgument naming the rank.
absl::Status CheckWorkerRank(const ParallelPlan& plan, int rank);

// The hash of the whole plan: sizes, world, instances and every slot's
// PlanHash (which covers its model and options), in slot order.
std::string ParallelPlanHash(const ParallelModel& model,
                             const ParallelPlanOptions& options);

}  // namespace zshard::plan
