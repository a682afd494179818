// Checkpoint-sourced moves: the two rank files of a W=2 checkpoint restore
// into buffers at W=3 (and W=4, I=2) through StateMover, with the moves
// PlanMoves makes from the files' ranges as fragments; a corrupt file is
// DataLoss.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/worker/checkpoint/checkpoint_file.h"
#include "client/worker/reshard/state_mover.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/worker/reshard/move_util.h"
#include "tests/worker/reshard/state_pattern.h"

namespace zshard::reshard {
namespace {

using ::testing::HasSubstr;

class CheckpointMovesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(
        ::testing::TempDir(), "/ckmoves_",
        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    // Instance 0 of a W=2 run writes its files.
    const plan::Plan two = testing::PatternPlan(model_, 2, 1);
    for (int r = 0; r < 2; ++r) {
      auto state = testing::FreshBuffers(model_, two, r);
      testing::FillPattern(*state);
      absl::StatusOr<checkpoint::RankFileInfo> file =
          checkpoint::WriteRankFile(*state, dir_, r, 20, 19);
      ASSERT_TRUE(file.ok()) << file.status();
      for (const plan::CheckpointFragment& range : file->ranges) {
        fragments_.push_back(range);
        fragment_files_.push_back(file->path);
      }
    }
  }

  // Restores into `world` x `instances` members; returns each one's stats.
  std::vector<absl::StatusOr<MoveStats>> Restore(
      int world, int instances,
      std::vector<std::unique_ptr<engine::EngineBuffers>>& states,
      testing::Transition& t) {
    const plan::Plan plan = testing::PatternPlan(model_, world, instances);
    std::vector<std::string> members;
    for (int r = 0; r < world; ++r) members.push_back(absl::StrCat("n", r));
    t = testing::PlanTransition(model_, nullptr, {}, {}, plan, members,
                                fragments_, fragment_files_);
    std::vector<absl::StatusOr<MoveStats>> out;
    for (int r = 0; r < world; ++r) {
      states.push_back(testing::FreshBuffers(model_, plan, r));
      MoveInput in;
      in.self = members[r];
      in.new_state = states.back().get();
      in.moves = t.moves;
      in.checkpoint_files = t.checkpoint_files;
      in.checkpoint_dir = dir_;
      // No member moves: no communicator, so no store either.
      StateMover mover(std::move(in));
      out.push_back(mover.Run());
    }
    return out;
  }

  plan::ModelSpec model_ = testing::PatternModel();
  std::string dir_;
  std::vector<plan::CheckpointFragment> fragments_;
  std::vector<std::string> fragment_files_;
};

TEST_F(CheckpointMovesTest, RestoresAtAnotherWorldAndInstanceCount) {
  for (auto [world, instances] : {std::pair{3, 1}, std::pair{4, 2}}) {
    SCOPED_TRACE(absl::StrCat("W=", world, " I=", instances));
    std::vector<std::unique_ptr<engine::EngineBuffers>> states;
    testing::Transition t;
    std::vector<absl::StatusOr<MoveStats>> stats =
        Restore(world, instances, states, t);
    ASSERT_TRUE(t.plan.lost.empty());
    int64_t from_checkpoint = 0;
    for (int r = 0; r < world; ++r) {
      ASSERT_TRUE(stats[r].ok()) << "rank " << r << ": " << stats[r].status();
      EXPECT_EQ(stats[r]->bytes_sent + stats[r]->bytes_received +
                    stats[r]->bytes_kept,
                0);
      from_checkpoint += stats[r]->bytes_from_checkpoint;
      EXPECT_EQ(
          testing::PatternMismatches(*states[r], absl::StrCat("rank ", r)), 0);
    }
    EXPECT_EQ(from_checkpoint, t.plan.bytes_from_checkpoint);
    EXPECT_EQ(from_checkpoint, t.plan.bytes_moved);
  }
}

TEST_F(CheckpointMovesTest, CorruptFileIsDataLoss) {
  const std::string path = absl::StrCat(dir_, "/", checkpoint::RankFileName(1));
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 4);
  std::vector<std::unique_ptr<engine::EngineBuffers>> states;
  testing::Transition t;
  std::vector<absl::StatusOr<MoveStats>> stats = Restore(3, 1, states, t);
  // Every rank that reads from rank 1's file fails, naming file and range.
  int failed = 0;
  for (int r = 0; r < 3; ++r) {
    bool reads_it = false;
    for (const plan::Move& m : t.moves) {
      reads_it |= m.dest_rank == r &&
                  m.source == plan::MoveSource::kCheckpoint &&
                  t.checkpoint_files.at(m.fragment) == "rank-00001.zsc";
    }
    if (!reads_it) {
      EXPECT_TRUE(stats[r].ok()) << stats[r].status();
      continue;
    }
    ++failed;
    EXPECT_EQ(stats[r].status().code(), absl::StatusCode::kDataLoss)
        << stats[r].status();
    EXPECT_THAT(stats[r].status().message(), HasSubstr("rank-00001.zsc"));
    EXPECT_THAT(stats[r].status().message(), HasSubstr("param 'p"));
  }
  EXPECT_GT(failed, 0);
}

}  // namespace
}  // namespace zshard::reshard
