// PlanCache: one plan per epoch.
#include "server/views/plan_cache.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace zshard::server {

absl::StatusOr<std::shared_ptr<const CachedPlan>> PlanCache::Get(
    const EpochPlan& epoch) {
  absl::MutexLock lock(&mu_);
  if (last_ != nullptr && last_->epoch == epoch.epoch &&
      last_->plan.world == epoch.world) {
    return last_;
  }
  if (spec_->parallel.model_parallel()) {
    // One plan per slot: the views of a single plan do not apply.
    return absl::FailedPreconditionError(absl::StrCat(
        "job '", spec_->name,
        "' is model-parallel: its plan and ledger are per slot (zshardctl "
        "plan --job FILE, zshardctl ledger --job FILE)"));
  }
  ZSHARD_ASSIGN_OR_RETURN(
      plan::Plan p,
      plan::MakePlan(spec_->model, job::JobPlanOptions(*spec_, epoch.world)));
  std::vector<plan::Member> members;
  for (int r = 0; r < epoch.world && r < static_cast<int>(epoch.slots.size());
       ++r) {
    const Slot& slot = epoch.slots[r];
    auto node = slot.labels.find("node");
    members.push_back(
        {slot.worker_id, node == slot.labels.end() ? "" : node->second});
  }
  auto cached = std::make_shared<CachedPlan>();
  cached->epoch = epoch.epoch;
  ZSHARD_ASSIGN_OR_RETURN(cached->index,
                          BuildPlanIndex(spec_->model, p, members));
  cached->plan = std::move(p);
  last_ = cached;
  return last_;
}

}  // namespace zshard::server
