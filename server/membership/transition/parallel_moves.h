// The moves of a model-parallel job's proposed epoch: each slot's state
// moves only inside the slot, so the moves are those of one single-slot
// job per slot (PlanMembersMoves over the slot's data-parallel domain, or
// PlanCheckpointMoves from the slot's checkpoint files), numbered in one
// list in slot order. Pure.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/plan/parallel_plan.h"
#include "server/membership/transition/epoch_moves.h"
#include "server/state/types.h"

namespace zshard::server {

// The members of slot `slot`'s data-parallel domain in `epoch` (of a
// model-parallel world), by data-parallel rank: an epoch of R x C ranks.
EpochPlan SlotEpoch(const plan::ParallelSizes& sizes, const EpochPlan& epoch,
                    int slot);

struct ParallelEpochMoves {
  // Every slot's moves; ranks and param indices are their slot's (its
  // data-parallel ranks, its model's params). Indices run over the list.
  EpochMoves moves;
  // The slot of moves.lost's first range (-1 when none is lost).
  int lost_slot = -1;
};

// PlanMembersMoves per slot, from the live members of `base` to `next`.
// Lost ranges are returned, not an error (those of the first slot that
// loses any). InvalidArgument naming the slot when a plan does not fit
// its epoch.
absl::StatusOr<ParallelEpochMoves> PlanParallelMembersMoves(
    const plan::ParallelModel& model, const plan::ParallelPlan& base_plan,
    const EpochPlan& base, const std::vector<std::string>& alive,
    const plan::ParallelPlan& next_plan, const EpochPlan& next);

// PlanCheckpointMoves per slot: every range of `next` from the files of
// `checkpoint` of its slot (a model-parallel checkpoint of the same tensor
// and pipeline sizes; any R, C and instances). FailedPrecondition when the
// sizes differ or a slot's files do not cover a range of it.
absl::StatusOr<EpochMoves> PlanParallelCheckpointMoves(
    const plan::ParallelModel& model, const CheckpointRecord& checkpoint,
    const plan::ParallelPlan& next_plan, const EpochPlan& next);

// DescribeLost with the slot: "slot (tp 1, pp 0): param ...".
std::string DescribeParallelLost(const plan::ParallelModel& model, int slot,
                                 const plan::LostRange& lost);

}  // namespace zshard::server
