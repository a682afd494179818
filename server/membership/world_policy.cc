// World size choice and rank assignment.
#include "server/membership/world_policy.h"

#include <algorithm>
#include <tuple>

#include "absl/strings/str_cat.h"

namespace zshard::server {

int ChooseWorld(int healthy, const job::WorldSpec& world, int target_world) {
  int cap = std::min(healthy, world.max);
  if (target_world > 0) cap = std::min(cap, target_world);
  if (world.instances <= 0 || cap < world.min) return 0;
  int w = cap - cap % world.instances;
  return w >= world.min ? w : 0;
}

std::string ExplainWorld(int chosen, int healthy, const job::WorldSpec& world,
                         int target_world) {
  std::string caps = absl::StrCat("healthy ", healthy, ", max ", world.max);
  if (target_world > 0) absl::StrAppend(&caps, ", target ", target_world);
  if (chosen == 0) {
    return absl::StrCat("no world: no multiple of I=", world.instances,
                        " within [min ", world.min, ", min(", caps, ")]");
  }
  return absl::StrCat("world ", chosen,
                      " = largest multiple of I=", world.instances,
                      " within [min ", world.min, ", min(", caps, ")]");
}

std::vector<std::string> AssignRanks(int world,
                                     std::vector<RankCandidate> candidates) {
  std::vector<std::string> slots(world);
  std::vector<RankCandidate> rest;
  for (RankCandidate& c : candidates) {
    if (c.prev_rank >= 0 && c.prev_rank < world && slots[c.prev_rank].empty()) {
      slots[c.prev_rank] = c.worker_id;
    } else {
      rest.push_back(std::move(c));
    }
  }
  // Order: displaced survivors (0), spares (1), newcomers (2).
  auto klass = [](const RankCandidate& c) {
    return c.prev_rank >= 0 ? 0 : (c.spare ? 1 : 2);
  };
  std::sort(rest.begin(), rest.end(),
            [&](const RankCandidate& a, const RankCandidate& b) {
              return std::make_tuple(klass(a), a.prev_rank, a.join_seq) <
                     std::make_tuple(klass(b), b.prev_rank, b.join_seq);
            });
  size_t next = 0;
  for (int r = 0; r < world && next < rest.size(); ++r) {
    if (slots[r].empty()) slots[r] = rest[next++].worker_id;
  }
  return slots;
}

}  // namespace zshard::server
