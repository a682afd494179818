// Test support: the moves of a transition as the worker's session hands
// them to the mover, planned with plan::PlanMoves from two plans'
// ownerships (checkpoint sources index the fragments' files).
#pragma once

#include <string>
#include <vector>

#include "common/plan/moves.h"
#include "common/plan/ownership.h"
#include "gtest/gtest.h"

namespace zshard::testing {

inline std::vector<plan::Member> Members(const std::vector<std::string>& ids) {
  std::vector<plan::Member> out;
  for (const std::string& id : ids) out.push_back({id, ""});
  return out;
}

// The plan's moves, the files their fragments name, and the plan itself.
struct Transition {
  plan::MovePlan plan;
  std::vector<plan::Move> moves;
  std::vector<std::string> checkpoint_files;
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
  t.moves = moves->moves;
  t.checkpoint_files = fragment_files;
  return t;
}

}  // namespace zshard::testing
