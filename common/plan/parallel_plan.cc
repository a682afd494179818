// MakeParallelPlan: one single-slot MakePlan per slot over its data-parallel
// domain, and the whole plan's hash.
#include "common/plan/parallel_plan.h"

#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/plan/plan_hash.h"
#include "common/status.h"

namespace zshard::plan {
namespace {

std::string SlotName(const ParallelSizes& sizes, int slot) {
  return absl::StrCat("slot (tp ", SlotTp(sizes, slot), ", pp ",
                      SlotPp(sizes, slot), ")");
}

absl::Status CheckSizes(const ParallelSizes& sizes) {
  if (sizes.tensor < 1 || sizes.pipeline < 1 || sizes.context < 1) {
    return CheckParallelWorld(sizes, 1);  // names the size below 1
  }
  const int64_t replica = int64_t{sizes.tensor} * sizes.pipeline *
                          static_cast<int64_t>(sizes.context);
  if (replica > (int64_t{1} << 30)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor x pipeline x context (", replica, ") is too large"));
  }
  return absl::OkStatus();
}

// The digest of the sizes, the world and the slots' own hashes.
std::string HashOf(const ParallelSizes& sizes, int world,
                   const std::vector<std::string>& slot_hashes) {
  Fnv1a64 h;
  h.Str("zshard-parallel-plan-v1");
  h.Int(sizes.tensor);
  h.Int(sizes.pipeline);
  h.Int(sizes.context);
  h.Int(world);
  h.Int(static_cast<int64_t>(slot_hashes.size()));
  for (const std::string& slot : slot_hashes) h.Str(slot);
  return absl::StrFormat("%016x", h.digest());
}

}  // namespace

absl::Status ValidateParallelModel(const ParallelModel& model) {
  ZSHARD_RETURN_IF_ERROR(CheckSizes(model.sizes));
  const int want = model.sizes.slots();
  if (static_cast<int>(model.slots.size()) != want) {
    return absl::InvalidArgumentError(
        absl::StrCat("the model has ", model.slots.size(),
                     " slots; tensor x pipeline is ", want));
  }
  for (int s = 0; s < want; ++s) {
    absl::Status valid = ValidateModelSpec(model.slots[s]);
    if (!valid.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(SlotName(model.sizes, s), ": ", valid.message()));
    }
  }
  return absl::OkStatus();
}

PlanOptions SlotPlanOptions(const ParallelSizes& sizes,
                            const ParallelPlanOptions& options) {
  PlanOptions o;
  o.world = DataParallelSize(sizes, options.world);
  o.instances = options.instances;
  o.layout = options.layout;
  return o;
}

absl::StatusOr<ParallelPlan> MakeParallelPlan(
    const ParallelModel& model, const ParallelPlanOptions& options) {
  ZSHARD_RETURN_IF_ERROR(ValidateParallelModel(model));
  const ParallelSizes& sizes = model.sizes;
  ZSHARD_RETURN_IF_ERROR(CheckParallelWorld(sizes, options.world));
  const int dp = DataParallelSize(sizes, options.world);
  if (options.instances < 1 || dp % options.instances != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("instances (", options.instances,
                     ") must divide the data-parallel size R x C (", dp, ")"));
  }
  ParallelPlan plan;
  plan.sizes = sizes;
  plan.world = options.world;
  plan.replicas = Replicas(sizes, options.world);
  plan.data_parallel = dp;
  plan.instances = options.instances;
  const PlanOptions slot_options = SlotPlanOptions(sizes, options);
  plan.slots.reserve(model.slots.size());
  for (size_t s = 0; s < model.slots.size(); ++s) {
    absl::StatusOr<Plan> slot = MakePlan(model.slots[s], slot_options);
    if (!slot.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          SlotName(sizes, static_cast<int>(s)), ": ", slot.status().message()));
    }
    plan.slots.push_back(*std::move(slot));
  }
  std::vector<std::string> slot_hashes;
  for (const Plan& slot : plan.slots) slot_hashes.push_back(slot.hash);
  plan.hash = HashOf(sizes, options.world, slot_hashes);
  return plan;
}

absl::Status CheckWorkerRank(const ParallelPlan& plan, int rank) {
  if (rank < 0 || rank >= plan.world) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker rank ", rank, " is out of range [0, ", plan.world, ")"));
  }
  return absl::OkStatus();
}

WorkerPlan MakeWorkerPlan(const ParallelModel& model, const ParallelPlan& plan,
                          int rank) {
  WorkerPlan w;
  w.rank = rank;
  if (!CheckWorkerRank(plan, rank).ok()) return w;
  w.position = PositionOf(plan.sizes, plan.world, rank);
  w.slot = SlotIndex(plan.sizes, w.position.tp, w.position.pp);
  w.dp_rank = DataParallelRank(plan.sizes, w.position);
  w.shards = MakeRankPlan(model.slots[w.slot], plan.slots[w.slot], w.dp_rank);
  return w;
}

std::string ParallelPlanHash(const ParallelModel& model,
                             const ParallelPlanOptions& options) {
  // Each slot's hash covers its model, its world R * C, I and the layout.
  const PlanOptions slot_options = SlotPlanOptions(model.sizes, options);
  std::vector<std::string> slots;
  for (const ModelSpec& slot : model.slots) {
    slots.push_back(PlanHash(slot, slot_options));
  }
  return HashOf(model.sizes, options.world, slots);
}

}  // namespace zshard::plan
