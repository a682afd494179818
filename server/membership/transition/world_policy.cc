// World size choice and rank assignment under keep_i and keep_d.
#include "server/membership/transition/world_policy.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"

namespace zshard::server {
namespace {

using job::ResizePolicy;

// min(world.max, target_world), the cap that does not depend on health.
int Limit(const job::WorldSpec& world, int target_world) {
  return target_world > 0 ? std::min(world.max, target_world) : world.max;
}

// Join order: spares first, then newcomers.
bool SpareFirst(const RankCandidate& a, const RankCandidate& b) {
  return std::make_tuple(!a.spare, a.join_seq, a.worker_id) <
         std::make_tuple(!b.spare, b.join_seq, b.worker_id);
}

std::vector<std::string> AssignKeepI(int world,
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

std::vector<std::string> AssignKeepD(int world, int instances,
                                     std::vector<RankCandidate> candidates) {
  const int d = world / instances;
  // Survivors by previous instance, each by shard rank; the others.
  std::map<int, std::map<int, RankCandidate>> by_instance;
  std::vector<RankCandidate> fresh;
  for (RankCandidate& c : candidates) {
    if (c.prev_rank >= 0) {
      by_instance[c.prev_rank / d][c.prev_rank % d] = std::move(c);
    } else {
      fresh.push_back(std::move(c));
    }
  }
  std::sort(fresh.begin(), fresh.end(), SpareFirst);
  // The previous instances that stay: the most survivors first (ties:
  // lower index), at most `instances`, renumbered in previous order.
  std::vector<int> order;
  for (const auto& [index, members] : by_instance) order.push_back(index);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return by_instance[a].size() > by_instance[b].size();
  });
  if (static_cast<int>(order.size()) > instances) order.resize(instances);
  std::sort(order.begin(), order.end());
  std::vector<std::string> slots(world);
  for (size_t k = 0; k < order.size(); ++k) {
    for (auto& [shard, c] : by_instance[order[k]]) {
      slots[k * d + shard] = c.worker_id;
    }
    by_instance.erase(order[k]);
  }
  // Survivors of dissolved instances by shard rank, in previous rank order.
  std::map<int, std::vector<std::string>> leftover;
  for (auto& [index, members] : by_instance) {
    for (auto& [shard, c] : members) leftover[shard].push_back(c.worker_id);
  }
  std::vector<int> holes;
  for (int r = 0; r < world; ++r) {
    if (!slots[r].empty()) continue;
    std::vector<std::string>& same = leftover[r % d];
    if (!same.empty()) {
      slots[r] = same.front();
      same.erase(same.begin());
    } else {
      holes.push_back(r);
    }
  }
  // Holes no survivor of the shard can fill: spares, newcomers, then the
  // other survivors (they hold another shard's state).
  std::vector<std::string> fill;
  for (const RankCandidate& c : fresh) fill.push_back(c.worker_id);
  for (auto& [shard, ids] : leftover) {
    fill.insert(fill.end(), ids.begin(), ids.end());
  }
  for (size_t i = 0; i < holes.size() && i < fill.size(); ++i) {
    slots[holes[i]] = fill[i];
  }
  return slots;
}

}  // namespace

int ChooseWorld(int healthy, const job::WorldSpec& world, int target_world) {
  const int cap = std::min(healthy, Limit(world, target_world));
  const int step = job::WorldStep(world);
  if (step <= 0 || cap < world.min) return 0;
  const int w = cap - cap % step;
  return w >= world.min ? w : 0;
}

std::string ExplainWorld(int chosen, int healthy, const job::WorldSpec& world,
                         int target_world) {
  const bool keep_d = world.resize == ResizePolicy::kKeepD;
  const int step = job::WorldStep(world);
  std::string caps = absl::StrCat("healthy ", healthy, ", max ", world.max);
  if (target_world > 0) absl::StrAppend(&caps, ", target ", target_world);
  const std::string within =
      absl::StrCat(" within [min ", world.min, ", min(", caps, ")]");
  const std::string unit =
      keep_d ? absl::StrCat("D=", step) : absl::StrCat("I=", step);
  if (chosen == 0) {
    return absl::StrCat("no world: no multiple of ", unit, within, " (",
                        job::ResizePolicyName(world.resize), ")");
  }
  if (!keep_d) {
    return absl::StrCat("world ", chosen, " = largest multiple of ", unit,
                        within, " (keep_i: I fixed, D = W / I follows the ",
                        "world)");
  }
  std::string why = "keep_d: D fixed";
  const int spares = healthy - chosen;
  if (spares > 0) {
    const int limit = Limit(world, target_world);
    const char* wait = chosen + step <= limit ? "wait for a whole instance"
                       : limit < world.max    ? "are beyond the target"
                                              : "are beyond max";
    absl::StrAppend(&why, "; ", spares, " healthy spare(s) ", wait);
  }
  return absl::StrCat("world ", chosen, " = ", chosen / step,
                      " instance(s) of ", unit, within, " (", why, ")");
}

std::vector<std::string> AssignRanks(const RankLayout& layout,
                                     std::vector<RankCandidate> candidates) {
  if (layout.resize == ResizePolicy::kKeepD && layout.instances > 0 &&
      layout.world % layout.instances == 0) {
    return AssignKeepD(layout.world, layout.instances, std::move(candidates));
  }
  return AssignKeepI(layout.world, std::move(candidates));
}

}  // namespace zshard::server
