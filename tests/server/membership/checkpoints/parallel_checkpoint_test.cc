// A model-parallel job's checkpoints: the per-slot completeness rule of the
// registry (every slot's data-parallel ranks 0..D-1 are in and cover that
// slot's params, in its own param space) and the per-slot restore moves.
#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/membership/checkpoints/checkpoint_registry.h"
#include "server/membership/transition/parallel_moves.h"
#include "tests/server/test_reports.h"

namespace zshard::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::Report;

plan::ParamSpec Param(const std::string& name, int64_t numel) {
  plan::ParamSpec p;
  p.name = name;
  p.shape = {numel};
  return p;
}

// T = 2, P = 1: slot 0 holds "a" (100 elements), slot 1 "b" (60) and "c"
// (40).
std::vector<plan::ModelSpec> Slots() {
  plan::ModelSpec s0, s1;
  s0.params = {Param("a", 100)};
  s1.params = {Param("b", 60), Param("c", 40)};
  return {s0, s1};
}

// World 4 of T = 2 (R = 2, I = 1): global rank r is tp r % 2 of replica
// r / 2, so slot r % 2 at data-parallel rank r / 2 (D = 2).
CheckpointEpoch Epoch() {
  CheckpointEpoch e;
  e.epoch = 3;
  e.world = 4;
  e.instances = 1;
  e.parallel.tensor = 2;
  return e;
}

// Global rank `rank`'s file: half of each of its slot's params (by its
// data-parallel rank), in the slot's param indices.
CheckpointFileInfo SlotHalf(int rank) {
  const int slot = rank % 2, dp = rank / 2;
  CheckpointFileInfo f;
  f.path = "slot-" + std::to_string(slot) + "/rank-0000" + std::to_string(dp) +
           ".zsc";
  f.rank = rank;
  f.bytes = 100;
  f.checksum = "00ff";
  if (slot == 0) {
    f.ranges = {{0, 0, dp * 50, (dp + 1) * 50}};
  } else {
    f.ranges = {{0, 0, dp * 30, (dp + 1) * 30}, {1, 0, dp * 20, (dp + 1) * 20}};
  }
  return f;
}

TEST(ParallelCheckpointTest, CommitsWhenEverySlotsRanksAreInAndCoverIt) {
  CheckpointRegistry reg;
  const std::vector<plan::ModelSpec> slots = Slots();
  for (int r : {0, 1, 3}) {
    auto added = reg.Add(Report(3, 10, SlotHalf(r)), Epoch(), slots);
    ASSERT_TRUE(added.ok()) << added.status();
    EXPECT_FALSE(added->has_value()) << "rank " << r;
  }
  ASSERT_EQ(reg.Incomplete().size(), 1u);
  EXPECT_EQ(reg.Incomplete()[0].files_reported, 3);
  EXPECT_EQ(reg.Incomplete()[0].files_expected, 4);
  auto done = reg.Add(Report(3, 10, SlotHalf(2)), Epoch(), slots);
  ASSERT_TRUE(done.ok()) << done.status();
  ASSERT_TRUE(done->has_value());
  const CheckpointRecord& c = **done;
  EXPECT_EQ(c.tensor, 2);
  EXPECT_EQ(c.pipeline, 1);
  EXPECT_EQ(c.context, 1);
  EXPECT_EQ(c.world, 4);
  EXPECT_THAT(c.slot_params, ElementsAre(1, 2));
  EXPECT_THAT(c.param_names, ElementsAre("a", "b", "c"));
  EXPECT_THAT(c.param_numels, ElementsAre(100, 60, 40));
  // By slot, then data-parallel rank; ranks are the slot's.
  ASSERT_EQ(c.files.size(), 4u);
  EXPECT_EQ(c.files[0].path, "slot-0/rank-00000.zsc");
  EXPECT_EQ(c.files[1].path, "slot-0/rank-00001.zsc");
  EXPECT_EQ(c.files[2].path, "slot-1/rank-00000.zsc");
  EXPECT_EQ(c.files[3].slot, 1);
  EXPECT_EQ(c.files[3].rank, 1);
  EXPECT_EQ(c.bytes, 400);
  EXPECT_EQ(SlotFiles(c, 1).size(), 2u);
  EXPECT_TRUE(CheckSlotsCoverage(c, slots, 1).ok());
}

TEST(ParallelCheckpointTest, ASlotLeftUncoveredIsRefusedNamingTheSlot) {
  CheckpointRegistry reg;
  const std::vector<plan::ModelSpec> slots = Slots();
  CheckpointFileInfo short3 = SlotHalf(3);
  short3.ranges[1].end -= 1;  // c's last element of slot 1 is missing
  for (int r : {0, 1, 2}) {
    ASSERT_TRUE(reg.Add(Report(3, 10, SlotHalf(r)), Epoch(), slots).ok());
  }
  auto gap = reg.Add(Report(3, 10, short3), Epoch(), slots);
  EXPECT_EQ(gap.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(gap.status().message()),
              HasSubstr("slot (tp 1, pp 0): param 'c' (expert rank 0) "
                        "element 39"));
  EXPECT_EQ(reg.Newest(), nullptr);
}

TEST(ParallelCheckpointTest, RangesAreCheckedAgainstTheirSlotsModel) {
  CheckpointRegistry reg;
  const std::vector<plan::ModelSpec> slots = Slots();
  CheckpointFileInfo bad = SlotHalf(0);
  bad.ranges.push_back({1, 0, 0, 10});  // slot 0 has one param
  EXPECT_EQ(reg.Add(Report(3, 10, bad), Epoch(), slots).status().code(),
            absl::StatusCode::kInvalidArgument);
  bad = SlotHalf(0);
  bad.rank = 4;  // outside the world
  EXPECT_EQ(reg.Add(Report(3, 10, bad), Epoch(), slots).status().code(),
            absl::StatusCode::kInvalidArgument);
  // Instances 2: D = 1, so replica 1 (data-parallel rank 1) is instance 1.
  CheckpointEpoch two = Epoch();
  two.instances = 2;
  EXPECT_THAT(
      std::string(
          reg.Add(Report(3, 10, SlotHalf(2)), two, slots).status().message()),
      HasSubstr("data-parallel ranks 0..0"));
  // One model for two slots.
  EXPECT_EQ(
      reg.Add(Report(3, 10, SlotHalf(0)), Epoch(), slots[0]).status().code(),
      absl::StatusCode::kInvalidArgument);
}

TEST(ParallelCheckpointTest, RestoreMovesReadEachSlotsFilesAtAnotherWorld) {
  CheckpointRegistry reg;
  const std::vector<plan::ModelSpec> slots = Slots();
  std::optional<CheckpointRecord> c;
  for (int r = 0; r < 4; ++r) {
    auto added = reg.Add(Report(3, 10, SlotHalf(r)), Epoch(), slots);
    ASSERT_TRUE(added.ok()) << added.status();
    if (added->has_value()) c = **added;
  }
  ASSERT_TRUE(c.has_value());
  // Restore into world 2 (R = 1): each slot's one rank reads both halves.
  plan::ParallelModel model{plan::ParallelSizes{2, 1, 1}, slots};
  plan::ParallelPlanOptions o;
  o.world = 2;
  auto next_plan = plan::MakeParallelPlan(model, o);
  ASSERT_TRUE(next_plan.ok()) << next_plan.status();
  EpochPlan next;
  next.epoch = 1;
  next.world = 2;
  for (int r = 0; r < 2; ++r) {
    Slot s;
    s.worker_id = "w" + std::to_string(r);
    s.rank = r;
    next.slots.push_back(s);
  }
  auto moves = PlanParallelCheckpointMoves(model, *c, *next_plan, next);
  ASSERT_TRUE(moves.ok()) << moves.status();
  // One full copy of every slot: 12 bytes per element (master, m, v).
  EXPECT_EQ(moves->summary.bytes_moved, 12 * (100 + 60 + 40));
  for (const plan::Move& m : moves->moves) {
    EXPECT_EQ(m.source, plan::MoveSource::kCheckpoint);
    // w0 holds slot 0 and reads only slot 0's files; w1 slot 1's.
    EXPECT_EQ(m.checkpoint_file.substr(0, 6),
              m.dest_member == "w0" ? "slot-0" : "slot-1");
  }
  EXPECT_GE(moves->moves.size(), 4u);
  // Another tensor size is refused in one line naming both shapes.
  plan::ParallelModel four{plan::ParallelSizes{1, 2, 1}, slots};
  auto refused = PlanParallelCheckpointMoves(four, *c, *next_plan, next);
  EXPECT_EQ(std::string(refused.status().message()),
            "the checkpoint was written with tensor 2, pipeline 1, context 1; "
            "this job has tensor 1, pipeline 2, context 1: restore needs the "
            "same tensor and pipeline sizes");
}

TEST(ParallelCheckpointTest, RestoreSizesAllowAnotherContextOnly) {
  EXPECT_TRUE(plan::CheckRestoreSizes({2, 2, 1}, {2, 2, 2}).ok());
  EXPECT_FALSE(plan::CheckRestoreSizes({2, 2, 1}, {4, 2, 1}).ok());
  EXPECT_FALSE(plan::CheckRestoreSizes({2, 2, 1}, {2, 1, 1}).ok());
  EXPECT_FALSE(plan::CheckRestoreSizes({1, 1, 1}, {2, 1, 1}).ok());
}

}  // namespace
}  // namespace zshard::server
