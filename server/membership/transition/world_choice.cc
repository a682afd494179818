// The world the coordinator proposes.
#include "server/membership/transition/world_choice.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "server/membership/transition/parallel_policy.h"
#include "server/membership/transition/world_policy.h"

namespace zshard::server {

int WorldChoice::Choose(int healthy) {
  if (spec_->parallel.model_parallel()) {
    return ChooseParallelWorld(healthy, *spec_, target_, [this](int world) {
      return !plans_.Hash(world).empty();
    });
  }
  int w = ChooseWorld(healthy, spec_->world, target_);
  while (w > 0 && plans_.Hash(w).empty()) {
    w -= job::WorldStep(spec_->world);
    if (w < spec_->world.min) w = 0;
  }
  return w;
}

std::string WorldChoice::Explain(int chosen, int healthy) const {
  return spec_->parallel.model_parallel()
             ? ExplainParallelWorld(chosen, healthy, *spec_, target_)
             : ExplainWorld(chosen, healthy, spec_->world, target_);
}

std::string WorldChoice::Unviable(int healthy) const {
  if (spec_->parallel.model_parallel()) {
    return absl::StrCat(healthy, " healthy members (", Explain(0, healthy),
                        ")");
  }
  // The smallest world the policy allows: a multiple of its step >= min.
  const int step = std::max(1, job::WorldStep(spec_->world));
  const int need = (spec_->world.min + step - 1) / step * step;
  return absl::StrCat(healthy, " healthy members, world needs ", need, " (",
                      ExplainWorld(0, healthy, spec_->world, target_), ")");
}

bool WorldChoice::NoteUnviable(const std::string& why) {
  if (why == last_unviable_) return false;
  last_unviable_ = why;
  return true;
}

}  // namespace zshard::server
