// PlanCache: one plan per epoch (one per slot for a model-parallel job).
#include "server/views/plan_cache.h"

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "server/membership/transition/parallel_moves.h"

namespace zshard::server {
namespace {

// The plan and index of `p` (made from `model`) over `ranks`' members.
absl::StatusOr<std::shared_ptr<const CachedPlan>> Index(
    const plan::ModelSpec* model, plan::Plan p, EpochPlan ranks) {
  std::vector<plan::Member> members;
  for (int r = 0; r < ranks.world && r < static_cast<int>(ranks.slots.size());
       ++r) {
    const Slot& slot = ranks.slots[r];
    auto node = slot.labels.find("node");
    members.push_back(
        {slot.worker_id, node == slot.labels.end() ? "" : node->second});
  }
  auto cached = std::make_shared<CachedPlan>();
  cached->epoch = ranks.epoch;
  cached->model = model;
  ZSHARD_ASSIGN_OR_RETURN(cached->index, BuildPlanIndex(*model, p, members));
  cached->plan = std::move(p);
  cached->ranks = std::move(ranks);
  return cached;
}

// Slot `slot`'s part of a model-parallel epoch: its members by
// data-parallel rank and the moves into them (each slot's moves stay in
// the slot: PlanParallelMembersMoves).
EpochPlan SlotRanks(const plan::ParallelSizes& sizes, const EpochPlan& epoch,
                    int slot) {
  EpochPlan out = SlotEpoch(sizes, epoch, slot);
  std::set<std::string> members;
  for (const Slot& s : out.slots) members.insert(s.worker_id);
  for (const plan::Move& m : epoch.moves) {
    if (members.count(m.dest_member) > 0) out.moves.push_back(m);
  }
  out.plan_hash = epoch.plan_hash;
  return out;
}

}  // namespace

PlanCache::PlanCache(const job::JobSpec* spec)
    : spec_(spec),
      parallel_model_(spec->parallel.model_parallel()
                          ? job::JobParallelModel(*spec)
                          : plan::ParallelModel()) {}

absl::StatusOr<std::shared_ptr<const CachedPlan>> PlanCache::Get(
    const EpochPlan& epoch) {
  absl::MutexLock lock(&mu_);
  if (last_ != nullptr && last_->epoch == epoch.epoch &&
      last_->plan.world == epoch.world) {
    return last_;
  }
  if (spec_->parallel.model_parallel()) {
    return absl::FailedPreconditionError(
        absl::StrCat("job '", spec_->name,
                     "' is model-parallel: its plan is one plan per slot"));
  }
  ZSHARD_ASSIGN_OR_RETURN(
      plan::Plan p,
      plan::MakePlan(spec_->model, job::JobPlanOptions(*spec_, epoch.world)));
  ZSHARD_ASSIGN_OR_RETURN(last_, Index(&spec_->model, std::move(p), epoch));
  return last_;
}

absl::StatusOr<std::shared_ptr<const CachedParallelPlan>>
PlanCache::GetParallel(const EpochPlan& epoch) {
  absl::MutexLock lock(&mu_);
  if (last_parallel_ != nullptr && last_parallel_->epoch == epoch.epoch &&
      last_parallel_->world == epoch.world) {
    return last_parallel_;
  }
  const plan::ParallelSizes& sizes = spec_->parallel;
  if (!sizes.model_parallel()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job '", spec_->name, "' is not model-parallel: it has no slots"));
  }
  ZSHARD_ASSIGN_OR_RETURN(
      plan::ParallelPlan p,
      plan::MakeParallelPlan(parallel_model_,
                             job::JobParallelPlanOptions(*spec_, epoch.world)));
  auto out = std::make_shared<CachedParallelPlan>();
  out->epoch = epoch.epoch;
  out->world = epoch.world;
  for (int s = 0; s < sizes.slots(); ++s) {
    const size_t i = static_cast<size_t>(s);
    ZSHARD_ASSIGN_OR_RETURN(
        std::shared_ptr<const CachedPlan> slot,
        Index(&parallel_model_.slots[i], std::move(p.slots[i]),
              SlotRanks(sizes, epoch, s)));
    out->slots.push_back(std::move(slot));
  }
  last_parallel_ = out;
  return last_parallel_;
}

}  // namespace zshard::server
