// Membership: a proposal's moves, from the live holders of the stable
// epoch or, when a range has none (a rollback) or on --restore, from the
// newest checkpoint; a model-parallel job's per slot.
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status.h"
#include "server/membership/membership.h"
#include "server/membership/transition/epoch_moves.h"
#include "server/membership/transition/parallel_moves.h"

namespace zshard::server {

absl::StatusOr<std::string> Membership::MemberMovesLocked(EpochPlan& p) {
  const EpochPlan& stable = transition_.stable();
  const plan::Plan* base_plan = world_.plans().Get(stable.world);
  const plan::Plan* next_plan = world_.plans().Get(p.world);
  std::vector<std::string> alive, preferred;
  for (int r = 0; r < stable.world; ++r) {
    const std::string& id = stable.slots[r].worker_id;
    if (!members_.IsLiveId(id)) continue;
    alive.push_back(id);
    if (health_.avoid_sources.count(id) == 0) preferred.push_back(id);
  }
  auto plan_from = [&](const std::vector<std::string>& holders) {
    return base_plan == nullptr
               ? absl::StatusOr<EpochMoves>(
                     absl::InternalError("no plan for the base epoch"))
               : PlanMembersMoves(spec_.model, *base_plan, stable, holders,
                                  *next_plan, p);
  };
  // Sources whose moves failed are avoided where another holder has the
  // same ranges (their own ranges then come from that holder too); where
  // none has, they are tried again.
  absl::StatusOr<EpochMoves> moves = plan_from(preferred);
  if (preferred.size() != alive.size() &&
      (!moves.ok() || !moves->lost.empty())) {
    moves = plan_from(alive);
  }
  if (!moves.ok()) return moves.status();
  if (!moves->lost.empty()) {
    return DescribeLost(spec_.model, moves->lost.front());
  }
  p.moves = std::move(moves->moves);
  p.summary = moves->summary;
  return std::string();
}

absl::StatusOr<std::string> Membership::ParallelMemberMovesLocked(
    EpochPlan& p) {
  const EpochPlan& stable = transition_.stable();
  const plan::ParallelPlan* base_plan =
      world_.plans().GetParallel(stable.world);
  if (base_plan == nullptr) {
    return absl::InternalError("no plan for the base epoch");
  }
  std::vector<std::string> alive;
  for (int r = 0; r < stable.world; ++r) {
    const std::string& id = stable.slots[r].worker_id;
    if (members_.IsLiveId(id)) alive.push_back(id);
  }
  const plan::ParallelModel model = job::JobParallelModel(spec_);
  ZSHARD_ASSIGN_OR_RETURN(
      ParallelEpochMoves moves,
      PlanParallelMembersMoves(model, *base_plan, stable, alive,
                               *world_.plans().GetParallel(p.world), p));
  if (moves.lost_slot >= 0) {
    return DescribeParallelLost(model, moves.lost_slot,
                                moves.moves.lost.front());
  }
  p.moves = std::move(moves.moves.moves);
  p.summary = moves.moves.summary;
  return std::string();
}

bool Membership::PlanMovesLocked(EpochPlan& p) {
  const bool parallel = spec_.parallel.model_parallel();
  const EpochPlan& stable = transition_.stable();
  const CheckpointRecord* newest = checkpoints_.Newest();
  if (parallel ? world_.plans().GetParallel(p.world) == nullptr
               : world_.plans().Get(p.world) == nullptr) {
    return false;
  }
  const bool from_checkpoint = checkpoints_.restore_next();
  if (!from_checkpoint && (stable.epoch == 0 || !HoldsState())) {
    return true;  // nothing held
  }
  if (!from_checkpoint) {
    absl::StatusOr<std::string> lost =
        parallel ? ParallelMemberMovesLocked(p) : MemberMovesLocked(p);
    if (!lost.ok()) {
      ZSHARD_LOG_ERROR(absl::StrCat("epoch ", p.epoch,
                                    ": moves: ", lost.status().message()));
      return false;
    }
    if (lost->empty()) return true;
    if (newest == nullptr) {
      FailJobLocked("lost", absl::StrCat(*lost,
                                         " has no live holder and there is no "
                                         "checkpoint: the job cannot go on"));
      return false;
    }
    EventLocked(
        "rollback",
        absl::StrCat(*lost, " has no live holder: epoch ", p.epoch,
                     " rolls back to the checkpoint of step ", newest->step));
  }
  if (newest == nullptr) {
    FailJobLocked("failed", "no checkpoint to restore from");
    return false;
  }
  // A model-parallel checkpoint restores each slot from its own files.
  absl::StatusOr<EpochMoves> moves =
      parallel
          ? PlanParallelCheckpointMoves(job::JobParallelModel(spec_), *newest,
                                        *world_.plans().GetParallel(p.world), p)
          : PlanCheckpointMoves(spec_.model, *newest,
                                *world_.plans().Get(p.world), p);
  if (!moves.ok()) {
    FailJobLocked("failed", std::string(moves.status().message()));
    return false;
  }
  p.moves = std::move(moves->moves);
  p.summary = moves->summary;
  p.restore = RestoreRef{newest->step, newest->dir, newest->adam_step};
  return true;
}

}  // namespace zshard::server
