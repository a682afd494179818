// The world policy of a model-parallel job (docs/design.md section 13), as
// pure functions: the elastic unit is a whole replica of T x P x C workers,
// and the resize policy applies to every slot's data-parallel domain of
// R x C ranks.
#pragma once

#include <string>
#include <vector>

#include "common/job/job_spec.h"
#include "common/plan/parallel.h"
#include "server/membership/transition/world_policy.h"

namespace zshard::server {

// The world (in workers) for `healthy` members of model-parallel `job`, 0
// when none: ChooseWorld over the slots' data-parallel sizes (the job's
// world.min and world.max divided by T x P; target_world likewise) that
// is a multiple of C and for which `viable` holds (the plan can be made),
// times T x P.
template <typename Viable>
int ChooseParallelWorld(int healthy, const job::JobSpec& job, int target_world,
                        Viable viable);

// Why: ExplainWorld of the data-parallel sizes, with the replica's shape
// ("model-parallel T2 x P2 x C1 = 4 workers a replica, data-parallel
// world 2 (...)").
std::string ExplainParallelWorld(int chosen, int healthy,
                                 const job::JobSpec& job, int target_world);

// Worker ids for ranks 0..world-1 of model-parallel `job`, the candidates'
// prev_rank being ranks of a world of `prev_world` (0: none yet). A
// replica is kept whole or dissolved: the previous replicas with the most
// survivors (ties: lower index) stay, renumbered in previous order, each
// survivor at its (tp, pp, cp); a hole in a kept replica is filled by a
// survivor of a dissolved replica at the same (tp, pp, cp) (it holds that
// slot's state), else a spare, then a newcomer (join order), then any other
// survivor; new replicas the same way. A tensor-parallel group (the T ranks
// of one replica, pp and cp) whose ranks are all to fill is placed on one
// node (the "node" label) when some node has T such members left, as
// Megatron keeps tensor parallelism inside a node. Survivors of dissolved
// replicas left over become spares. Requires candidates.size() >= world,
// unique ids.
std::vector<std::string> AssignParallelRanks(
    const job::JobSpec& job, int world, int prev_world,
    std::vector<RankCandidate> candidates);

// How the tensor-parallel groups of a world of `world` ranks sit on
// nodes, `node_by_rank[r]` being rank r's node label (empty: none), in
// sentences: how many groups are on one node, and each group that spans
// nodes (at most a few named) with why: no labels, or no node had T
// members free when it was placed.
std::vector<std::string> DescribeTensorPlacement(
    const plan::ParallelSizes& sizes, int world,
    const std::vector<std::string>& node_by_rank);

template <typename Viable>
int ChooseParallelWorld(int healthy, const job::JobSpec& job, int target_world,
                        Viable viable) {
  const int mp = job.parallel.slots();
  const int context = job.parallel.context;
  const job::WorldSpec dp = job::SlotWorld(job);
  const int target = target_world / mp;
  if (target_world > 0 && target == 0) return 0;
  for (int cap = healthy / mp; cap > 0;) {
    const int w = ChooseWorld(cap, dp, target);
    if (w <= 0) return 0;
    if (w % context == 0 && viable(w * mp)) return w * mp;
    cap = w - 1;
  }
  return 0;
}

}  // namespace zshard::server
