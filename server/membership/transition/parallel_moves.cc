// A model-parallel epoch's moves: one single-slot move plan per slot.
#include "server/membership/transition/parallel_moves.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "server/membership/checkpoints/checkpoint_registry.h"

namespace zshard::server {

EpochPlan SlotEpoch(const plan::ParallelSizes& sizes, const EpochPlan& epoch,
                    int slot) {
  EpochPlan out;
  out.epoch = epoch.epoch;
  out.base_epoch = epoch.base_epoch;
  out.world = plan::DataParallelSize(sizes, epoch.world);
  out.instances = epoch.instances;
  const int tp = plan::SlotTp(sizes, slot);
  const int pp = plan::SlotPp(sizes, slot);
  for (int k = 0; k < out.world; ++k) {
    const int rank = plan::RankOf(
        sizes, epoch.world, plan::PositionOfDataParallelRank(sizes, tp, pp, k));
    if (rank < static_cast<int>(epoch.slots.size())) {
      out.slots.push_back(epoch.slots[static_cast<size_t>(rank)]);
    }
  }
  return out;
}

namespace {

// `slot`'s moves (or its error, then named by slot) appended to `out`.
absl::Status AppendSlot(const plan::ParallelSizes& sizes, int s,
                        absl::StatusOr<EpochMoves> slot,
                        ParallelEpochMoves* out) {
  if (!slot.ok()) {
    return absl::Status(
        slot.status().code(),
        absl::StrCat("slot (tp ", plan::SlotTp(sizes, s), ", pp ",
                     plan::SlotPp(sizes, s), "): ", slot.status().message()));
  }
  if (!slot->lost.empty() && out->lost_slot < 0) {
    out->lost_slot = s;
    out->moves.lost = std::move(slot->lost);
  }
  const int first = static_cast<int>(out->moves.moves.size());
  for (plan::Move& m : slot->moves) {
    m.index += first;
    out->moves.moves.push_back(std::move(m));
  }
  MoveSummary& sum = out->moves.summary;
  sum.moves += slot->summary.moves;
  sum.bytes_moved += slot->summary.bytes_moved;
  sum.lower_bound_bytes += slot->summary.lower_bound_bytes;
  sum.bytes_from_checkpoint += slot->summary.bytes_from_checkpoint;
  sum.bytes_same_node += slot->summary.bytes_same_node;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ParallelEpochMoves> PlanParallelMembersMoves(
    const plan::ParallelModel& model, const plan::ParallelPlan& base_plan,
    const EpochPlan& base, const std::vector<std::string>& alive,
    const plan::ParallelPlan& next_plan, const EpochPlan& next) {
  const plan::ParallelSizes& sizes = model.sizes;
  ParallelEpochMoves out;
  for (int s = 0; s < sizes.slots(); ++s) {
    ZSHARD_RETURN_IF_ERROR(
        AppendSlot(sizes, s,
                   PlanMembersMoves(model.slots[static_cast<size_t>(s)],
                                    base_plan.slots[static_cast<size_t>(s)],
                                    SlotEpoch(sizes, base, s), alive,
                                    next_plan.slots[static_cast<size_t>(s)],
                                    SlotEpoch(sizes, next, s)),
                   &out));
  }
  return out;
}

absl::StatusOr<EpochMoves> PlanParallelCheckpointMoves(
    const plan::ParallelModel& model, const CheckpointRecord& checkpoint,
    const plan::ParallelPlan& next_plan, const EpochPlan& next) {
  const plan::ParallelSizes& sizes = model.sizes;
  ZSHARD_RETURN_IF_ERROR(plan::CheckRestoreSizes(
      {checkpoint.tensor, checkpoint.pipeline, checkpoint.context}, sizes));
  ParallelEpochMoves out;
  for (int s = 0; s < sizes.slots(); ++s) {
    // The slot's view of the checkpoint: its files, its param indices.
    CheckpointRecord view;
    view.step = checkpoint.step;
    view.files = SlotFiles(checkpoint, s);
    ZSHARD_RETURN_IF_ERROR(AppendSlot(
        sizes, s,
        PlanCheckpointMoves(model.slots[static_cast<size_t>(s)], view,
                            next_plan.slots[static_cast<size_t>(s)],
                            SlotEpoch(sizes, next, s)),
        &out));
  }
  return std::move(out.moves);
}

std::string DescribeParallelLost(const plan::ParallelModel& model, int slot,
                                 const plan::LostRange& lost) {
  return absl::StrCat(
      "slot (tp ", plan::SlotTp(model.sizes, slot), ", pp ",
      plan::SlotPp(model.sizes, slot),
      "): ", DescribeLost(model.slots[static_cast<size_t>(slot)], lost));
}

}  // namespace zshard::server
