// Planning an epoch's moves from members or from a checkpoint.
#include "server/membership/transition/epoch_moves.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace zshard::server {
namespace {

absl::StatusOr<plan::Ownership> OwnershipOf(const plan::ModelSpec& model,
                                            const plan::Plan& p,
                                            const EpochPlan& epoch) {
  if (static_cast<int>(epoch.slots.size()) < epoch.world ||
      p.world != epoch.world) {
    return absl::InvalidArgumentError(absl::StrCat(
        "epoch ", epoch.epoch, " does not match its plan's world ", p.world));
  }
  std::vector<plan::Member> members;
  members.reserve(epoch.world);
  for (int r = 0; r < epoch.world; ++r) {
    const Slot& s = epoch.slots[r];
    auto node = s.labels.find("node");
    members.push_back(plan::Member{
        s.worker_id, node == s.labels.end() ? std::string() : node->second});
  }
  return plan::MakeOwnership(model, p, members);
}

EpochMoves Convert(const plan::MovePlan& mp,
                   const std::vector<std::string>* fragment_files) {
  EpochMoves out;
  out.moves = mp.moves;
  if (fragment_files != nullptr) {
    for (plan::Move& m : out.moves) {
      if (m.source == plan::MoveSource::kCheckpoint && m.fragment >= 0 &&
          m.fragment < static_cast<int>(fragment_files->size())) {
        m.checkpoint_file = (*fragment_files)[m.fragment];
      }
    }
  }
  out.summary.moves = static_cast<int>(mp.moves.size());
  out.summary.bytes_moved = mp.bytes_moved;
  out.summary.lower_bound_bytes = mp.lower_bound_bytes;
  out.summary.bytes_from_checkpoint = mp.bytes_from_checkpoint;
  out.summary.bytes_same_node = mp.bytes_same_node;
  out.lost = mp.lost;
  return out;
}

}  // namespace

absl::StatusOr<EpochMoves> PlanMembersMoves(
    const plan::ModelSpec& model, const plan::Plan& base_plan,
    const EpochPlan& base, const std::vector<std::string>& alive,
    const plan::Plan& next_plan, const EpochPlan& next) {
  ZSHARD_ASSIGN_OR_RETURN(plan::Ownership previous,
                          OwnershipOf(model, base_plan, base));
  ZSHARD_ASSIGN_OR_RETURN(plan::Ownership own,
                          OwnershipOf(model, next_plan, next));
  plan::MoveOptions options;
  options.fail_on_loss = false;
  ZSHARD_ASSIGN_OR_RETURN(plan::MovePlan mp,
                          plan::PlanMoves(previous, alive, {}, own, options));
  return Convert(mp, nullptr);
}

absl::StatusOr<EpochMoves> PlanCheckpointMoves(
    const plan::ModelSpec& model, const CheckpointRecord& checkpoint,
    const plan::Plan& next_plan, const EpochPlan& next) {
  ZSHARD_ASSIGN_OR_RETURN(plan::Ownership own,
                          OwnershipOf(model, next_plan, next));
  std::vector<plan::CheckpointFragment> fragments;
  std::vector<std::string> files;
  for (const CheckpointFileInfo& f : checkpoint.files) {
    for (const ParamRangeInfo& r : f.ranges) {
      fragments.push_back(plan::CheckpointFragment{r.param_index, r.expert_rank,
                                                   r.begin, r.end});
      files.push_back(f.path);
    }
  }
  plan::MoveOptions options;
  options.fail_on_loss = false;
  ZSHARD_ASSIGN_OR_RETURN(
      plan::MovePlan mp,
      plan::PlanMoves(plan::Ownership(), {}, fragments, own, options));
  if (!mp.lost.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint step ", checkpoint.step, " lacks ",
                     DescribeLost(model, mp.lost.front())));
  }
  return Convert(mp, &files);
}

MovesByMember IndexMovesByMember(const std::vector<plan::Move>& moves) {
  MovesByMember out;
  for (int i = 0; i < static_cast<int>(moves.size()); ++i) {
    const plan::Move& m = moves[i];
    if (m.source == plan::MoveSource::kMember &&
        m.source_member != m.dest_member) {
      out[m.source_member].push_back(i);
    }
    out[m.dest_member].push_back(i);
  }
  return out;
}

std::string DescribeLost(const plan::ModelSpec& model,
                         const plan::LostRange& lost) {
  std::string name =
      lost.param_index >= 0 &&
              lost.param_index < static_cast<int>(model.params.size())
          ? model.params[lost.param_index].name
          : absl::StrCat("#", lost.param_index);
  return absl::StrCat("param '", name, "' (expert rank ", lost.expert_rank,
                      ") elements [", lost.begin, ", ", lost.end, ")");
}

}  // namespace zshard::server
