// State-movement planner table cases: joins, leaves, failures with and
// without a spare, changes of I, checkpoint restores, lost ranges, source
// preferences and determinism. Every case is also checked element by
// element (move_checker.h), and moved bytes must equal the lower bound.
#include "common/plan/moves.h"

#include <cstdlib>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/plan/ownership.h"
#include "common/plan/plan.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/plan/move_checker.h"

namespace zshard::plan {
namespace {

using ::testing::HasSubstr;

ModelSpec SmallModel() {
  ModelSpec model;
  model.name = "small";
  const int64_t sizes[] = {1000, 300, 5000, 7, 2048, 640};
  for (int i = 0; i < 6; ++i) {
    ParamSpec p;
    p.name = "p" + std::to_string(i);
    p.shape = {sizes[i]};
    model.params.push_back(p);
  }
  return model;
}

// Members "m<i>" for i in `ids`, with node label "n<i / 2>".
std::vector<Member> Members(const std::vector<int>& ids) {
  std::vector<Member> out;
  for (int i : ids) {
    out.push_back({"m" + std::to_string(i), "n" + std::to_string(i / 2)});
  }
  return out;
}

std::vector<std::string> Ids(const std::vector<int>& ids) {
  std::vector<std::string> out;
  for (int i : ids) out.push_back("m" + std::to_string(i));
  return out;
}

Ownership Own(const ModelSpec& model, int world, int instances,
              const std::vector<Member>& members) {
  PlanOptions options;
  options.world = world;
  options.instances = instances;
  options.layout.bucket_size = 4000;
  absl::StatusOr<Plan> plan = MakePlan(model, options);
  EXPECT_TRUE(plan.ok()) << plan.status();
  absl::StatusOr<Ownership> own = MakeOwnership(model, *plan, members);
  EXPECT_TRUE(own.ok()) << own.status();
  return *own;
}

int64_t ElementsOfRank(const Ownership& own, int rank) {
  int64_t n = 0;
  for (const OwnedRange& r : own.ranges) n += r.rank == rank ? r.size() : 0;
  return n;
}

// Plans, checks element by element, and expects moved == lower bound > 0.
MovePlan PlanAndCheck(const Ownership& previous,
                      const std::vector<std::string>& alive,
                      const std::vector<CheckpointFragment>& fragments,
                      const Ownership& next) {
  absl::StatusOr<MovePlan> plan = PlanMoves(previous, alive, fragments, next);
  EXPECT_TRUE(plan.ok()) << plan.status();
  if (!plan.ok()) return MovePlan();
  EXPECT_EQ(testing::CheckMovePlan(previous, alive, fragments, next, *plan),
            "");
  EXPECT_GT(plan->bytes_moved, 0);
  EXPECT_EQ(plan->bytes_moved, plan->lower_bound_bytes);
  EXPECT_TRUE(plan->lost.empty());
  return *plan;
}

TEST(OwnershipTest, EveryElementHeldOncePerInstance) {
  const ModelSpec model = SmallModel();
  const Ownership own = Own(model, 4, 2, Members({0, 1, 2, 3}));
  EXPECT_EQ(ElementsOfRank(own, 0) + ElementsOfRank(own, 1), model.numel());
  EXPECT_EQ(ElementsOfRank(own, 2) + ElementsOfRank(own, 3), model.numel());
  EXPECT_EQ(ElementsOfRank(own, 0), ElementsOfRank(own, 2));
}

TEST(OwnershipTest, RejectsBadAssignments) {
  const ModelSpec model = SmallModel();
  PlanOptions options;
  options.world = 2;
  const Plan plan = *MakePlan(model, options);
  EXPECT_EQ(MakeOwnership(model, plan, Members({0})).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeOwnership(model, plan, {{"a", ""}, {"a", ""}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeOwnership(model, plan, {{"a", ""}, {"", ""}}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(MovesTest, Join3To4) {
  const ModelSpec model = SmallModel();
  const Ownership before = Own(model, 3, 1, Members({0, 1, 2}));
  const Ownership after = Own(model, 4, 1, Members({0, 1, 2, 3}));
  const MovePlan plan = PlanAndCheck(before, Ids({0, 1, 2}), {}, after);
  EXPECT_EQ(plan.bytes_from_checkpoint, 0);
}

TEST(MovesTest, Leave4To3) {
  const ModelSpec model = SmallModel();
  const Ownership before = Own(model, 4, 1, Members({0, 1, 2, 3}));
  const Ownership after = Own(model, 3, 1, Members({0, 1, 2}));
  // The leaving member is still alive: it hands its ranges over.
  const MovePlan plan = PlanAndCheck(before, Ids({0, 1, 2, 3}), {}, after);
  std::set<std::string> sources;
  for (const Move& m : plan.moves) sources.insert(m.source_member);
  EXPECT_TRUE(sources.count("m3"));
}

TEST(MovesTest, FailureWithSpareMovesExactlyTheDeadShard) {
  const ModelSpec model = SmallModel();
  const Ownership before = Own(model, 4, 2, Members({0, 1, 2, 3}));
  std::vector<Member> members = Members({0, 1, 2, 3});
  members[1] = {"spare", "n9"};
  const Ownership after = Own(model, 4, 2, members);
  const MovePlan plan = PlanAndCheck(before, Ids({0, 2, 3}), {}, after);
  EXPECT_EQ(plan.bytes_moved, 12 * ElementsOfRank(before, 1));
  int pieces = 0;
  for (const OwnedRange& r : before.ranges) pieces += r.rank == 1;
  EXPECT_EQ(static_cast<int>(plan.moves.size()), pieces);
  for (const Move& m : plan.moves) {
    EXPECT_EQ(m.dest_member, "spare");
    EXPECT_EQ(m.source_member, "m3");  // the other instance's shard rank 1
    EXPECT_EQ(m.source_offset_in_bucket, m.dest_offset_in_bucket);
  }
}

TEST(MovesTest, FailureWithoutSpareHalvesD) {
  const ModelSpec model = SmallModel();
  const Ownership before = Own(model, 4, 2, Members({0, 1, 2, 3}));
  const Ownership after = Own(model, 2, 2, Members({0, 2}));  // D 2 -> 1
  const MovePlan plan = PlanAndCheck(before, Ids({0, 2, 3}), {}, after);
  // Each survivor needs the other half of the model.
  EXPECT_EQ(plan.bytes_moved,
            12 * (ElementsOfRank(before, 1) + ElementsOfRank(before, 3)));
}

TEST(MovesTest, ChangeOfInstances) {
  const ModelSpec model = SmallModel();
  const std::vector<Member> members = Members({0, 1, 2, 3});
  const Ownership one = Own(model, 4, 1, members);
  const Ownership two = Own(model, 4, 2, members);
  const std::vector<std::string> all = Ids({0, 1, 2, 3});
  const MovePlan up = PlanAndCheck(one, all, {}, two);
  const MovePlan down = PlanAndCheck(two, all, {}, one);
  EXPECT_GT(up.bytes_moved, down.bytes_moved);  // I=2 holds twice the state
}

TEST(MovesTest, CheckpointRestoreAtDifferentWorld) {
  const ModelSpec model = SmallModel();
  // The checkpoint was written by instance 0 of a W=4, I=2 job.
  const Ownership writer = Own(model, 4, 2, Members({0, 1, 2, 3}));
  std::vector<CheckpointFragment> fragments;
  for (const OwnedRange& r : writer.ranges) {
    if (r.rank < 2) {
      fragments.push_back({r.param_index, r.expert_rank, r.begin, r.end});
    }
  }
  const Ownership after = Own(model, 3, 1, Members({5, 6, 7}));
  const MovePlan plan = PlanAndCheck(Ownership(), {}, fragments, after);
  EXPECT_EQ(plan.bytes_from_checkpoint, plan.bytes_moved);
  EXPECT_EQ(plan.bytes_moved, 12 * model.numel());
  // A rollback: the old members live on but their state is not trusted.
  const MovePlan rollback = PlanAndCheck(writer, {}, fragments, after);
  EXPECT_EQ(rollback.bytes_from_checkpoint, 12 * model.numel());
}

TEST(MovesTest, LostRangeIsReported) {
  const ModelSpec model = SmallModel();
  const Ownership before = Own(model, 3, 1, Members({0, 1, 2}));
  const Ownership after = Own(model, 2, 1, Members({0, 2}));
  absl::StatusOr<MovePlan> failed = PlanMoves(before, Ids({0, 2}), {}, after);
  ASSERT_EQ(failed.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(failed.status().message(), HasSubstr("no live holder"));
  MoveOptions options;
  options.fail_on_loss = false;
  absl::StatusOr<MovePlan> plan =
      PlanMoves(before, Ids({0, 2}), {}, after, options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_FALSE(plan->lost.empty());
  int64_t lost = 0;
  for (const LostRange& l : plan->lost) lost += l.end - l.begin;
  EXPECT_EQ(lost, ElementsOfRank(before, 1));
  EXPECT_EQ(plan->bytes_moved + 12 * lost, plan->lower_bound_bytes);
  EXPECT_EQ(testing::CheckMovePlan(before, Ids({0, 2}), {}, after, *plan), "");
}

// Old: W=2, I=2 (every member holds everything) on nodes a and b.
Ownership TwoReplicas(const ModelSpec& model) {
  return Own(model, 2, 2, {{"a0", "a"}, {"b0", "b"}});
}

TEST(MovesTest, PrefersSameNodeSource) {
  const ModelSpec model = SmallModel();
  const Ownership after =
      Own(model, 3, 3, {{"a0", "a"}, {"b0", "b"}, {"b1", "b"}});
  const MovePlan plan =
      PlanAndCheck(TwoReplicas(model), {"a0", "b0"}, {}, after);
  for (const Move& m : plan.moves) EXPECT_EQ(m.source_member, "b0");
  EXPECT_EQ(plan.bytes_same_node, plan.bytes_moved);
}

TEST(MovesTest, SpreadsLoadOverEqualSources) {
  const ModelSpec model = SmallModel();
  const Ownership after =
      Own(model, 3, 3, {{"a0", "a"}, {"b0", "b"}, {"c0", "c"}});
  const MovePlan plan =
      PlanAndCheck(TwoReplicas(model), {"a0", "b0"}, {}, after);
  int64_t from_a = 0, from_b = 0;
  for (const Move& m : plan.moves) {
    (m.source_member == "a0" ? from_a : from_b) += m.bytes();
  }
  EXPECT_GT(from_a, 0);
  EXPECT_GT(from_b, 0);
  EXPECT_LE(std::abs(from_a - from_b), 12 * 5000);  // the largest param
  EXPECT_EQ(plan.bytes_same_node, 0);
}

std::string Describe(const MovePlan& plan) {
  std::string out;
  for (const Move& m : plan.moves) {
    out += absl::StrCat(
        static_cast<int>(m.source), m.source_member, ":", m.source_rank, ":",
        m.source_buffer, ":", m.source_bucket, ":", m.source_offset_in_bucket,
        ":", m.fragment, ">", m.dest_member, ":", m.dest_rank, ":",
        m.dest_buffer, ":", m.dest_bucket, ":", m.dest_offset_in_bucket, "@",
        m.param_index, ":", m.expert_rank, ":", m.begin, ":", m.end, ";");
  }
  return out;
}

TEST(MovesTest, Deterministic) {
  const ModelSpec model = SmallModel();
  const Ownership before = Own(model, 4, 2, Members({0, 1, 2, 3}));
  const Ownership after = Own(model, 6, 2, Members({0, 2, 3, 4, 5, 6}));
  const MovePlan a = PlanAndCheck(before, Ids({0, 2, 3}), {}, after);
  const MovePlan b = PlanAndCheck(before, Ids({3, 2, 0}), {}, after);
  EXPECT_EQ(Describe(a), Describe(b));
  EXPECT_EQ(a.bytes_moved, b.bytes_moved);
}

TEST(MovesTest, RejectsMismatchedInputs) {
  const ModelSpec model = SmallModel();
  const Ownership before = Own(model, 2, 1, Members({0, 1}));
  ModelSpec other = model;
  other.params.pop_back();
  const Ownership after = Own(other, 2, 1, Members({0, 1}));
  EXPECT_EQ(PlanMoves(before, Ids({0, 1}), {}, after).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      PlanMoves(before, Ids({0, 1}), {{0, 0, 5, 5}}, before).status().code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      PlanMoves(before, Ids({0, 1}), {{9, 0, 0, 5}}, before).status().code(),
      absl::StatusCode::kInvalidArgument);
}

TEST(MovesTest, NoChangeMovesNothing) {
  const ModelSpec model = SmallModel();
  const Ownership own = Own(model, 4, 2, Members({0, 1, 2, 3}));
  absl::StatusOr<MovePlan> plan = PlanMoves(own, Ids({0, 1, 2, 3}), {}, own);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->moves.empty());
  EXPECT_EQ(plan->lower_bound_bytes, 0);
}

}  // namespace
}  // namespace zshard::plan
