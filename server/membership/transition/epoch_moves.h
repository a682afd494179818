// The moves of a proposed epoch (protocol point 3 of live re-sharding):
// ownership of the base epoch and of the proposal from their plans and rank
// assignments, the state-movement planner in param space, and the
// planner's moves (checkpoint sources named by file) with their
// MoveSummary; each member's share of them. Pure.
#pragma once

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "common/plan/moves.h"
#include "common/plan/plan.h"
#include "server/state/checkpoint_types.h"
#include "server/state/types.h"

namespace zshard::server {

struct EpochMoves {
  std::vector<plan::Move> moves;
  MoveSummary summary;
  // Ranges no live member holds (only from PlanMembersMoves).
  std::vector<plan::LostRange> lost;
};

// Moves from the live members of `base` (planned with `base_plan`) to
// `next` (planned with `next_plan`); `alive` lists base members whose
// state is intact. Lost ranges are returned, not an error. InvalidArgument
// when a plan does not fit its epoch or the model.
absl::StatusOr<EpochMoves> PlanMembersMoves(
    const plan::ModelSpec& model, const plan::Plan& base_plan,
    const EpochPlan& base, const std::vector<std::string>& alive,
    const plan::Plan& next_plan, const EpochPlan& next);

// Every range of `next` from the files of `checkpoint`; each move names
// its file. FailedPrecondition when the checkpoint does not cover a range.
absl::StatusOr<EpochMoves> PlanCheckpointMoves(
    const plan::ModelSpec& model, const CheckpointRecord& checkpoint,
    const plan::Plan& next_plan, const EpochPlan& next);

// Each member's moves in an epoch's list: the positions of the moves it
// sends or receives (a checkpoint read under its receiver; a move to
// itself once), ascending. Built once per epoch, so that sending every
// watcher its own moves costs O(moves) in all, not O(moves) per watcher.
using MovesByMember = absl::flat_hash_map<std::string, std::vector<int>>;
MovesByMember IndexMovesByMember(const std::vector<plan::Move>& moves);

// "param 'h.3.w' (expert rank 0) elements [0, 1280)".
std::string DescribeLost(const plan::ModelSpec& model,
                         const plan::LostRange& lost);

}  // namespace zshard::server
