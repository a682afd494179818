// The world policy and rank assignment of DESIGN.md section 6, as pure
// functions: how many ranks a job runs with, and who holds which rank.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/job/job_spec.h"

namespace zshard::server {

// The largest multiple W of world.instances with
// world.min <= W <= min(healthy, world.max, target_world); 0 when there is
// none (too few healthy members). target_world 0 means no cap.
int ChooseWorld(int healthy, const job::WorldSpec& world, int target_world);

// Why ChooseWorld gives `chosen` (its result for the same inputs), in
// words: "world 4 = largest multiple of I=2 within [min 2, min(healthy 5,
// max 4)]", or "no world: 1 healthy member(s), fewer than min 2".
std::string ExplainWorld(int chosen, int healthy, const job::WorldSpec& world,
                         int target_world);

// A live member that may get a rank.
struct RankCandidate {
  std::string worker_id;
  int prev_rank = -1;  // rank in the committed epoch, -1 if none
  bool spare = false;  // a spare of the committed epoch
  int64_t join_seq = 0;
};

// Worker ids for ranks 0..world-1. Survivors keep their ranks; free ranks
// are filled, in ascending order, by survivors whose rank no longer fits
// (they hold state), then spares, then newcomers, each in join order.
// Requires candidates.size() >= world and unique ids.
std::vector<std::string> AssignRanks(int world,
                                     std::vector<RankCandidate> candidates);

}  // namespace zshard::server
