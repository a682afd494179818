// Plans by world size.
#include "server/membership/transition/world_plans.h"

#include <utility>

namespace zshard::server {

void WorldPlans::Put(int world, plan::Plan plan) {
  hashes_[world] = plan.hash;
  plans_[world] = std::make_shared<const plan::Plan>(std::move(plan));
}

void WorldPlans::PutParallel(int world, plan::ParallelPlan plan) {
  hashes_[world] = plan.hash;
  parallel_[world] =
      std::make_shared<const plan::ParallelPlan>(std::move(plan));
}

const plan::ParallelPlan* WorldPlans::GetParallel(int world) {
  if (!spec_->parallel.model_parallel()) return nullptr;
  auto it = parallel_.find(world);
  if (it != parallel_.end()) return it->second.get();
  auto p = plan::MakeParallelPlan(job::JobParallelModel(*spec_),
                                  job::JobParallelPlanOptions(*spec_, world));
  if (!p.ok()) {
    hashes_[world] = "";
    return nullptr;
  }
  PutParallel(world, *std::move(p));
  return parallel_.at(world).get();
}

const plan::Plan* WorldPlans::Get(int world) {
  if (spec_->parallel.model_parallel()) return nullptr;
  auto it = plans_.find(world);
  if (it != plans_.end()) return it->second.get();
  auto p = plan::MakePlan(spec_->model, job::JobPlanOptions(*spec_, world));
  if (!p.ok()) {
    hashes_[world] = "";
    return nullptr;
  }
  Put(world, *std::move(p));
  return plans_.at(world).get();
}

std::string WorldPlans::Hash(int world) {
  auto it = hashes_.find(world);
  if (it != hashes_.end()) return it->second;
  if (spec_->parallel.model_parallel()) {
    const plan::ParallelPlan* p = GetParallel(world);
    return p == nullptr ? "" : p->hash;
  }
  const plan::Plan* p = Get(world);
  return p == nullptr ? "" : p->hash;
}

}  // namespace zshard::server
