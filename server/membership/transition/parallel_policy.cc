// World choice and rank assignment of model-parallel jobs: whole replicas.
#include "server/membership/transition/parallel_policy.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/plan/parallel.h"

namespace zshard::server {

std::string ExplainParallelWorld(int chosen, int healthy,
                                 const job::JobSpec& job, int target_world) {
  const plan::ParallelSizes& s = job.parallel;
  const int mp = s.slots();
  return absl::StrCat("model-parallel T", s.tensor, " x P", s.pipeline, " x C",
                      s.context, " = ", s.replica_size(),
                      " workers a replica, data-parallel ",
                      ExplainWorld(chosen / mp, healthy / mp,
                                   job::SlotWorld(job), target_world / mp));
}

namespace {

// Fills every tensor-parallel group whose T ranks are all in `holes` from
// one node's members of `fresh` (join order kept; the node whose first
// member joined first), removing what it used from both.
void PlaceTensorGroups(const plan::ParallelSizes& sizes, int world,
                       std::vector<int>* holes,
                       std::vector<RankCandidate>* fresh,
                       std::vector<std::string>* ranks) {
  const int t = sizes.tensor;
  if (t < 2) return;
  std::vector<bool> open(static_cast<size_t>(world), false);
  for (int r : *holes) open[static_cast<size_t>(r)] = true;
  std::vector<bool> used(fresh->size(), false);
  // Ranks tp = 0 of each group: the group is [first, first + T).
  for (int first = 0; first + t <= world; first += t) {
    bool all = true;
    for (int k = 0; k < t; ++k)
      all = all && open[static_cast<size_t>(first + k)];
    if (!all) continue;
    std::map<std::string, std::vector<size_t>> by_node;
    std::vector<std::string> node_order;
    for (size_t i = 0; i < fresh->size(); ++i) {
      const std::string& node = (*fresh)[i].node;
      if (used[i] || node.empty()) continue;
      if (by_node[node].empty()) node_order.push_back(node);
      by_node[node].push_back(i);
    }
    for (const std::string& node : node_order) {
      const std::vector<size_t>& members = by_node[node];
      if (static_cast<int>(members.size()) < t) continue;
      for (int k = 0; k < t; ++k) {
        const size_t i = members[static_cast<size_t>(k)];
        used[i] = true;
        (*ranks)[static_cast<size_t>(first + k)] = (*fresh)[i].worker_id;
        open[static_cast<size_t>(first + k)] = false;
      }
      break;
    }
  }
  std::vector<int> left;
  for (int r : *holes) {
    if (open[static_cast<size_t>(r)]) left.push_back(r);
  }
  *holes = std::move(left);
  std::vector<RankCandidate> rest;
  for (size_t i = 0; i < fresh->size(); ++i) {
    if (!used[i]) rest.push_back(std::move((*fresh)[i]));
  }
  *fresh = std::move(rest);
}

}  // namespace

std::vector<std::string> DescribeTensorPlacement(
    const plan::ParallelSizes& sizes, int world,
    const std::vector<std::string>& node_by_rank) {
  const int t = sizes.tensor;
  if (t < 2 || !plan::CheckParallelWorld(sizes, world).ok() ||
      static_cast<int>(node_by_rank.size()) < world) {
    return {};
  }
  int together = 0, groups = 0, unlabelled = 0;
  std::vector<std::string> split;
  for (int first = 0; first + t <= world; first += t) {
    ++groups;
    std::vector<std::string> nodes;
    bool labelled = true;
    for (int k = 0; k < t; ++k) {
      const std::string& node = node_by_rank[static_cast<size_t>(first + k)];
      labelled = labelled && !node.empty();
      if (std::find(nodes.begin(), nodes.end(), node) == nodes.end()) {
        nodes.push_back(node.empty() ? "(no node label)" : node);
      }
    }
    if (!labelled) ++unlabelled;
    if (labelled && nodes.size() == 1) {
      ++together;
      continue;
    }
    const plan::Position p = plan::PositionOf(sizes, world, first);
    if (split.size() < 4) {
      split.push_back(absl::StrCat("replica ", p.replica, " pp ", p.pp, " cp ",
                                   p.cp, " spans ",
                                   absl::StrJoin(nodes, ", ")));
    }
  }
  std::vector<std::string> out;
  out.push_back(absl::StrCat(
      "Tensor-parallel groups (", t, " ranks each) on one node: ", together,
      " of ", groups, "; a group is placed on one node when some node has ", t,
      " members free for it (the \"node\" label), as tensor parallelism "
      "needs the fastest links."));
  if (!split.empty()) {
    out.push_back(absl::StrCat(
        "Not kept: ", absl::StrJoin(split, "; "),
        groups - together > static_cast<int>(split.size())
            ? absl::StrCat(" and ", groups - together - split.size(), " more")
            : "",
        unlabelled > 0 ? " (members without a node label)"
                       : " (no node had the members free when it was placed)",
        "."));
  }
  return out;
}

std::vector<std::string> AssignParallelRanks(
    const job::JobSpec& job, int world, int prev_world,
    std::vector<RankCandidate> candidates) {
  const plan::ParallelSizes& sizes = job.parallel;
  const int replicas = plan::Replicas(sizes, world);
  // A position inside a replica: (tp, pp, cp) as one index.
  auto inner = [&](const plan::Position& p) {
    return p.tp + sizes.tensor * (p.cp + sizes.context * p.pp);
  };
  // Survivors by previous replica, each by inner position; the others.
  std::map<int, std::map<int, std::string>> by_replica;
  std::vector<RankCandidate> fresh;
  for (RankCandidate& c : candidates) {
    if (c.prev_rank >= 0 && c.prev_rank < prev_world &&
        plan::CheckParallelWorld(sizes, prev_world).ok()) {
      const plan::Position p = plan::PositionOf(sizes, prev_world, c.prev_rank);
      by_replica[p.replica][inner(p)] = c.worker_id;
    } else {
      fresh.push_back(std::move(c));
    }
  }
  std::sort(fresh.begin(), fresh.end(),
            [](const RankCandidate& a, const RankCandidate& b) {
              return std::make_tuple(!a.spare, a.join_seq, a.worker_id) <
                     std::make_tuple(!b.spare, b.join_seq, b.worker_id);
            });
  std::vector<int> order;
  for (const auto& [index, members] : by_replica) order.push_back(index);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return by_replica[a].size() > by_replica[b].size();
  });
  if (static_cast<int>(order.size()) > replicas) order.resize(replicas);
  std::sort(order.begin(), order.end());
  std::vector<std::string> ranks(world);
  auto rank_at = [&](int replica, int in) {
    plan::Position p;
    p.replica = replica;
    p.tp = in % sizes.tensor;
    p.cp = in / sizes.tensor % sizes.context;
    p.pp = in / (sizes.tensor * sizes.context);
    return plan::RankOf(sizes, world, p);
  };
  for (size_t k = 0; k < order.size(); ++k) {
    for (const auto& [in, id] : by_replica[order[k]]) {
      ranks[rank_at(static_cast<int>(k), in)] = id;
    }
    by_replica.erase(order[k]);
  }
  // Survivors of dissolved replicas by inner position, in replica order.
  std::map<int, std::vector<std::string>> leftover;
  for (const auto& [index, members] : by_replica) {
    for (const auto& [in, id] : members) leftover[in].push_back(id);
  }
  std::vector<int> holes;
  const int size = sizes.replica_size();
  for (int replica = 0; replica < replicas; ++replica) {
    for (int in = 0; in < size; ++in) {
      const int r = rank_at(replica, in);
      if (!ranks[r].empty()) continue;
      std::vector<std::string>& same = leftover[in];
      if (!same.empty()) {
        ranks[r] = same.front();
        same.erase(same.begin());
      } else {
        holes.push_back(r);
      }
    }
  }
  std::sort(holes.begin(), holes.end());
  PlaceTensorGroups(sizes, world, &holes, &fresh, &ranks);
  std::vector<std::string> fill;
  for (const RankCandidate& c : fresh) fill.push_back(c.worker_id);
  for (const auto& [in, ids] : leftover) {
    fill.insert(fill.end(), ids.begin(), ids.end());
  }
  for (size_t i = 0; i < holes.size() && i < fill.size(); ++i) {
    ranks[holes[i]] = fill[i];
  }
  return ranks;
}

}  // namespace zshard::server
