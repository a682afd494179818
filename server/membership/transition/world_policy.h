// The world policy and rank assignment of docs/design.md section 6, as pure
// functions: how many ranks a job runs with, in how many instances, and who
// holds which rank, under the job's resize policy (world.resize).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/job/job_spec.h"

namespace zshard::server {

// The longest membership changes wait in one settle window, in windows of
// transition_settle_ms (coalesce.cc): once an epoch committed (training
// waits for the proposal), and while the job forms (no epoch committed yet:
// nothing trains, so a long start is gathered into one proposal, as
// torchrun's last call does).
inline constexpr int64_t kMaxSettleWindows = 10;
inline constexpr int64_t kMaxFormingSettleWindows = 100;

// The world for `healthy` members, 0 when there is none (too few healthy
// members). With cap = min(healthy, world.max, target_world):
//   keep_i: the largest multiple W of world.instances with
//           world.min <= W <= cap;
//   keep_d: W = I' x D with D = world.max / world.instances fixed and I'
//           the largest in [1, world.instances] with W <= cap, if
//           W >= world.min.
// target_world 0 means no cap. Its instance count is
// job::InstancesOf(world, W).
int ChooseWorld(int healthy, const job::WorldSpec& world, int target_world);

// Why ChooseWorld gives `chosen` (its result for the same inputs), in
// words, naming the policy:
//   keep_i: "world 4 = largest multiple of I=2 within [min 2, min(healthy 5,
//           max 4)] (keep_i: I fixed, D = W / I follows the world)";
//   keep_d: "world 8 = 2 instance(s) of D=4 within [min 4, min(healthy 11,
//           max 16)] (keep_d: D fixed; 3 healthy spare(s) wait for a whole
//           instance)";
//   none:   "no world: no multiple of I=2 within [min 2, min(healthy 1,
//           max 4)]".
std::string ExplainWorld(int chosen, int healthy, const job::WorldSpec& world,
                         int target_world);

// A live member that may get a rank.
struct RankCandidate {
  std::string worker_id;
  int prev_rank = -1;  // rank in the epoch that holds the state, -1 if none
  bool spare = false;  // a spare of the committed epoch
  int64_t join_seq = 0;
  // Its "node" label (empty: none): a model-parallel job places a tensor
  // parallel group on one node when it can (parallel_policy.h).
  std::string node;
};

// The shape AssignRanks fills.
struct RankLayout {
  int world = 0;      // W
  int instances = 1;  // I' (keep_d) or I (keep_i); divides W
  job::ResizePolicy resize = job::ResizePolicy::kKeepI;
};

// Worker ids for ranks 0..world-1. Requires candidates.size() >= world and
// unique ids.
//   keep_i: survivors keep their ranks; free ranks are filled, in
//     ascending order, by survivors whose rank no longer fits (they hold
//     state), then spares, then newcomers, each in join order.
//   keep_d (D = world / instances, also the D of prev_rank): every member
//     keeps its shard rank (prev_rank % D) where it can. The previous
//     instances with the most survivors (ties: lower index) stay whole and
//     are renumbered in order of their previous index; a hole in one is
//     filled by a survivor of the same shard rank from a previous instance
//     that is dissolved (no bytes move), else by a spare, then a newcomer
//     (each in join order), then any other survivor; instances beyond the
//     previous ones are filled the same way. The members of a dissolved
//     instance left over become spares.
std::vector<std::string> AssignRanks(const RankLayout& layout,
                                     std::vector<RankCandidate> candidates);

}  // namespace zshard::server
