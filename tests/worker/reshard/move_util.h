// Test support: the moves of a transition as the coordinator sends them,
// planned with plan::PlanMoves from two plans' ownerships and converted to
// v1::Move (checkpoint sources name their fragment's file).
#pragma once

#include <string>
#include <vector>

#include "common/plan/moves.h"
#include "common/plan/ownership.h"
#include "gtest/gtest.h"
#include "zshard/v1/types.pb.h"

namespace zshard::testing {

inline std::vector<plan::Member> Members(const std::vector<std::string>& ids) {
  std::vector<plan::Member> out;
  for (const std::string& id : ids) out.push_back({id, ""});
  return out;
}

inline v1::Move ToProto(const plan::Move& m,
                        const std::vector<std::string>& fragment_files) {
  v1::Move out;
  out.set_from_rank(m.source == plan::MoveSource::kMember ? m.source_rank : -1);
  out.set_to_rank(m.dest_rank);
  out.set_buffer(m.dest_buffer);
  out.set_bucket(m.dest_bucket);
  out.set_offset(m.dest_offset_in_bucket);
  out.set_length(m.elements());
  out.set_from_worker_id(m.source_member);
  out.set_to_worker_id(m.dest_member);
  out.set_param_index(m.param_index);
  out.set_expert_rank(m.expert_rank);
  out.set_begin(m.begin);
  out.set_end(m.end);
  if (m.source == plan::MoveSource::kCheckpoint) {
    out.set_checkpoint_file(fragment_files.at(m.fragment));
  }
  return out;
}

// The plan's moves in the coordinator's form, and the plan itself.
struct Transition {
  plan::MovePlan plan;
  std::vector<v1::Move> moves;
};

inline Transition PlanTransition(
    const plan::ModelSpec& model, const plan::Plan* old_plan,
    const std::vector<std::string>& old_members,
    const std::vector<std::string>& alive, const plan::Plan& new_plan,
    const std::vector<std::string>& new_members,
    const std::vector<plan::CheckpointFragment>& fragments = {},
    const std::vector<std::string>& fragment_files = {}) {
  plan::Ownership previous;
  if (old_plan != nullptr) {
    absl::StatusOr<plan::Ownership> own =
        plan::MakeOwnership(model, *old_plan, Members(old_members));
    EXPECT_TRUE(own.ok()) << own.status();
    previous = *own;
  }
  absl::StatusOr<plan::Ownership> next =
      plan::MakeOwnership(model, new_plan, Members(new_members));
  EXPECT_TRUE(next.ok()) << next.status();
  absl::StatusOr<plan::MovePlan> moves =
      plan::PlanMoves(previous, alive, fragments, *next);
  EXPECT_TRUE(moves.ok()) << moves.status();
  Transition t;
  t.plan = *moves;
  for (const plan::Move& m : moves->moves) {
    t.moves.push_back(ToProto(m, fragment_files));
  }
  return t;
}

}  // namespace zshard::testing
