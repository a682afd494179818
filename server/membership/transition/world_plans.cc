// Plans by world size.
#include "server/membership/transition/world_plans.h"

#include <utility>

namespace zshard::server {

void WorldPlans::Put(int world, plan::Plan plan) {
  hashes_[world] = plan.hash;
  plans_[world] = std::make_shared<const plan::Plan>(std::move(plan));
}

const plan::Plan* WorldPlans::Get(int world) {
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
  const plan::Plan* p = Get(world);
  return p == nullptr ? "" : p->hash;
}

}  // namespace zshard::server
