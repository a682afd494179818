// Tests of the transition handler's re-sharding phases against a fake
// runner: PREPARED acks carry the runner's state and come from base
// rank holders outside the new epoch; a committed epoch is handed over
// whole and acked ACTIVE only when the runner says it is ready; STABLE
// reaches the runner once; replays never prepare an epoch twice.

#include <string>
#include <utility>
#include <vector>

#include "client/worker/session/transition_handler.h"
#include "gtest/gtest.h"

namespace zshard::worker {
namespace {

// Records what the handler tells it; prepares every epoch "later".
class FakeRunner : public Runner {
 public:
  void OnProposed(int64_t epoch, int64_t base_epoch) override {
    proposed.emplace_back(epoch, base_epoch);
  }
  EpochStart OnEpochCommitted(const EpochInfo& epoch) override {
    committed.push_back(epoch);
    return start;
  }
  void OnEpochStable(int64_t epoch) override { stable.push_back(epoch); }
  void Activate(int64_t step) override {
    active_ = true;
    step_ = step;
    ++activations;
  }
  int64_t Pause() override {
    active_ = false;
    ++pauses;
    return step_;
  }
  PreparedState prepared_state() const override { return prepared; }
  void Abort() override {}
  absl::Status failure() const override { return absl::OkStatus(); }
  void OnJobEnd(bool, const std::string&) override {}
  void OnWaiting(const std::string&) override {}
  int64_t step() const override { return step_; }
  bool active() const override { return active_; }
  bool done() const override { return false; }

  EpochStart start = EpochStart::kPending;
  PreparedState prepared;
  std::vector<std::pair<int64_t, int64_t>> proposed;
  std::vector<EpochInfo> committed;
  std::vector<int64_t> stable;
  int activations = 0;
  int pauses = 0;

 private:
  bool active_ = false;
  int64_t step_ = 0;
};

v1::PlanUpdate Update(int64_t epoch, v1::PlanPhase phase, int64_t base_epoch,
                      std::vector<std::pair<std::string, int>> members) {
  v1::PlanUpdate update;
  update.set_epoch(epoch);
  update.set_phase(phase);
  update.set_base_epoch(base_epoch);
  update.set_world(0);
  for (const auto& [id, rank] : members) {
    v1::Assignment* a = update.add_assignments();
    a->set_worker_id(id);
    a->set_rank(rank);
    a->set_instance(rank >= 0 ? rank / 2 : -1);
    a->set_shard_rank(rank >= 0 ? rank % 2 : -1);
    if (rank >= 0) update.set_world(update.world() + 1);
  }
  return update;
}

class TransitionPhasesTest : public ::testing::Test {
 protected:
  // Brings the handler to stable epoch `epoch` with rank `rank`.
  void MakeStable(int64_t epoch, int rank) {
    ASSERT_TRUE(handler_.Apply(
        Update(epoch, v1::PLAN_PHASE_PROPOSED, 0, {{"w0", 0}, {"w1", rank}})));
    handler_.Apply(
        Update(epoch, v1::PLAN_PHASE_COMMITTED, 0, {{"w0", 0}, {"w1", rank}}));
    handler_.EpochReady(epoch);
    handler_.Apply(
        Update(epoch, v1::PLAN_PHASE_STABLE, 0, {{"w0", 0}, {"w1", rank}}));
  }

  FakeRunner runner_;
  TransitionHandler handler_{"w1", &runner_};
};

TEST_F(TransitionPhasesTest, PreparedAckCarriesTheWorkloadState) {
  runner_.prepared = {12, 11, true, {3.0, 4.5, 0.25}};
  auto ack = handler_.Apply(
      Update(1, v1::PLAN_PHASE_PROPOSED, 0, {{"w0", 0}, {"w1", 1}}));
  ASSERT_TRUE(ack.has_value());
  EXPECT_EQ(ack->phase, v1::ACK_PHASE_PREPARED);
  EXPECT_EQ(ack->step, 12);
  EXPECT_EQ(ack->adam_step, 11);
  EXPECT_TRUE(ack->commit_pending);
  EXPECT_EQ(ack->commit_values, (std::vector<double>{3.0, 4.5, 0.25}));
  EXPECT_EQ(runner_.pauses, 1);
  ASSERT_EQ(runner_.proposed.size(), 1u);
  EXPECT_EQ(runner_.proposed[0], (std::pair<int64_t, int64_t>{1, 0}));
}

TEST_F(TransitionPhasesTest, CommitConvertsMovesAndAssignmentsOnce) {
  v1::PlanUpdate commit =
      Update(4, v1::PLAN_PHASE_COMMITTED, 3, {{"w0", 0}, {"w1", 1}});
  (*commit.mutable_assignments(1)->mutable_labels())["node"] = "n1";
  commit.mutable_assignments(1)->set_address("10.0.0.2:7000");
  v1::Move* sent = commit.add_moves();
  sent->set_from_rank(0);
  sent->set_to_rank(1);
  sent->set_buffer(1);
  sent->set_bucket(2);
  sent->set_offset(30);
  sent->set_from_worker_id("w0");
  sent->set_to_worker_id("w1");
  sent->set_param_index(2);
  sent->set_expert_rank(1);
  sent->set_begin(10);
  sent->set_end(20);
  sent->set_index(7);  // its place in the epoch's full list
  // Three checkpoint reads from two files: each file is listed once.
  for (const char* file :
       {"rank-00001.zsc", "rank-00000.zsc", "rank-00001.zsc"}) {
    v1::Move* read = commit.add_moves();
    read->set_from_rank(-1);
    read->set_to_worker_id("w1");
    read->set_checkpoint_file(file);
  }
  handler_.Apply(commit);
  ASSERT_EQ(runner_.committed.size(), 1u);
  const EpochInfo& info = runner_.committed[0];
  ASSERT_EQ(info.moves.size(), 4u);
  const plan::Move& m = info.moves[0];
  EXPECT_EQ(m.source, plan::MoveSource::kMember);
  EXPECT_EQ(m.source_member, "w0");
  EXPECT_EQ(m.source_rank, 0);
  EXPECT_EQ(m.fragment, -1);
  EXPECT_EQ(m.dest_member, "w1");
  EXPECT_EQ(m.dest_rank, 1);
  EXPECT_EQ(m.dest_buffer, 1);
  EXPECT_EQ(m.dest_bucket, 2);
  EXPECT_EQ(m.dest_offset_in_bucket, 30);
  EXPECT_EQ(m.param_index, 2);
  EXPECT_EQ(m.expert_rank, 1);
  EXPECT_EQ(m.begin, 10);
  EXPECT_EQ(m.end, 20);
  EXPECT_EQ(m.index, 7);
  EXPECT_EQ(info.checkpoint_files,
            (std::vector<std::string>{"rank-00001.zsc", "rank-00000.zsc"}));
  for (int i = 1; i < 4; ++i) {
    EXPECT_EQ(info.moves[i].source, plan::MoveSource::kCheckpoint);
    EXPECT_EQ(info.moves[i].source_rank, -1);
  }
  EXPECT_EQ(info.moves[1].fragment, 0);
  EXPECT_EQ(info.moves[2].fragment, 1);
  EXPECT_EQ(info.moves[3].fragment, 0);
  ASSERT_EQ(info.assignments.size(), 2u);
  EXPECT_EQ(info.assignments[1].worker_id, "w1");
  EXPECT_EQ(info.assignments[1].address, "10.0.0.2:7000");
  EXPECT_EQ(info.assignments[1].rank, 1);
  EXPECT_EQ(info.assignments[1].instance, 0);
  EXPECT_EQ(info.assignments[1].shard_rank, 1);
  EXPECT_EQ(info.assignments[1].labels.at("node"), "n1");
}

TEST_F(TransitionPhasesTest, BaseRankHolderOutsideTheNewEpochPrepares) {
  MakeStable(1, 1);
  // Epoch 2 leaves w1 out; it holds rank 1 of the base: a source of moves.
  auto ack = handler_.Apply(Update(2, v1::PLAN_PHASE_PROPOSED, 1, {{"w0", 0}}));
  ASSERT_TRUE(ack.has_value());
  EXPECT_EQ(ack->epoch, 2);
  EXPECT_EQ(ack->phase, v1::ACK_PHASE_PREPARED);
}

TEST_F(TransitionPhasesTest, NonHolderOutsideTheNewEpochDoesNotPrepare) {
  MakeStable(1, -1);  // a spare of epoch 1
  EXPECT_FALSE(
      handler_.Apply(Update(2, v1::PLAN_PHASE_PROPOSED, 1, {{"w0", 0}})));
  EXPECT_FALSE(runner_.active());
}

TEST_F(TransitionPhasesTest, CommitHandsTheWholeEpochOverAndAcksWhenReady) {
  handler_.Apply(Update(4, v1::PLAN_PHASE_PROPOSED, 3, {{"w0", 0}, {"w1", 1}}));
  v1::PlanUpdate commit =
      Update(4, v1::PLAN_PHASE_COMMITTED, 3, {{"w0", 0}, {"w1", 1}});
  commit.set_resume_step(30);
  commit.set_resume_adam_step(28);
  commit.set_finish_pending_step(true);
  commit.add_commit_values(1.5);
  commit.mutable_restore()->set_dir("/ckpt/step-00000030");
  commit.mutable_restore()->set_step(30);
  v1::Move* move = commit.add_moves();
  move->set_from_worker_id("w0");
  move->set_to_worker_id("w1");
  move->set_param_index(2);
  move->set_begin(10);
  move->set_end(20);
  EXPECT_FALSE(handler_.Apply(commit));  // not ready yet: no ack
  ASSERT_EQ(runner_.committed.size(), 1u);
  const EpochInfo& info = runner_.committed[0];
  EXPECT_EQ(info.epoch, 4);
  EXPECT_EQ(info.base_epoch, 3);
  EXPECT_EQ(info.rank, 1);
  EXPECT_EQ(info.instance, 0);
  EXPECT_EQ(info.shard_rank, 1);
  EXPECT_EQ(info.world, 2);
  EXPECT_EQ(info.worker_id, "w1");
  EXPECT_EQ(info.resume_step, 30);
  EXPECT_EQ(info.resume_adam_step, 28);
  EXPECT_TRUE(info.finish_pending_step);
  EXPECT_EQ(info.commit_values, (std::vector<double>{1.5}));
  EXPECT_TRUE(info.restore);
  EXPECT_EQ(info.restore_dir, "/ckpt/step-00000030");
  ASSERT_EQ(info.moves.size(), 1u);
  EXPECT_EQ(info.moves[0].param_index, 2);
  EXPECT_EQ(info.assignments.size(), 2u);
  EXPECT_EQ(runner_.activations, 0);  // steps only once stable

  auto ack = handler_.EpochReady(4);
  ASSERT_TRUE(ack.has_value());
  EXPECT_EQ(ack->epoch, 4);
  EXPECT_EQ(ack->phase, v1::ACK_PHASE_ACTIVE);
  EXPECT_EQ(ack->step, 30);
  EXPECT_EQ(handler_.epoch(), 4);
  EXPECT_EQ(handler_.rank(), 1);
}

TEST_F(TransitionPhasesTest, CommitReplayNeverPreparesTwice) {
  const v1::PlanUpdate commit =
      Update(2, v1::PLAN_PHASE_COMMITTED, 1, {{"w0", 0}, {"w1", 1}});
  EXPECT_FALSE(handler_.Apply(commit));
  // Replayed while the runner is still preparing: no ack, no second run.
  EXPECT_FALSE(handler_.Apply(commit));
  EXPECT_EQ(runner_.committed.size(), 1u);
  ASSERT_TRUE(handler_.EpochReady(2).has_value());
  // Replayed once ready (the first ACTIVE ack may have been lost): the ack
  // again, still no second run.
  auto ack = handler_.Apply(commit);
  ASSERT_TRUE(ack.has_value());
  EXPECT_EQ(ack->phase, v1::ACK_PHASE_ACTIVE);
  EXPECT_EQ(runner_.committed.size(), 1u);
  // A stale proposal of the same epoch is ignored.
  EXPECT_FALSE(handler_.Apply(
      Update(2, v1::PLAN_PHASE_PROPOSED, 1, {{"w0", 0}, {"w1", 1}})));
  EXPECT_EQ(runner_.committed.size(), 1u);
}

TEST_F(TransitionPhasesTest, StableReachesTheWorkloadOnce) {
  MakeStable(1, 1);
  EXPECT_EQ(runner_.stable, (std::vector<int64_t>{1}));
  EXPECT_EQ(handler_.stable_epoch(), 1);
  EXPECT_EQ(handler_.stable_rank(), 1);
  EXPECT_FALSE(handler_.Apply(
      Update(1, v1::PLAN_PHASE_STABLE, 0, {{"w0", 0}, {"w1", 1}})));
  EXPECT_EQ(runner_.stable, (std::vector<int64_t>{1}));
  // The fake ignores OnEpochStable: the handler re-activates the rank.
  EXPECT_TRUE(runner_.active());
}

TEST_F(TransitionPhasesTest, StableOfAnUnseenEpochIsRecorded) {
  // A new joiner's first update is the stable epoch it is not part of.
  EXPECT_FALSE(
      handler_.Apply(Update(5, v1::PLAN_PHASE_STABLE, 4, {{"w0", 0}})));
  EXPECT_EQ(handler_.epoch(), 5);
  EXPECT_EQ(handler_.stable_epoch(), 5);
  EXPECT_EQ(handler_.stable_rank(), -1);
  EXPECT_TRUE(runner_.committed.empty());
  EXPECT_FALSE(runner_.active());
  // It takes part in the next proposal, which names that base.
  auto ack = handler_.Apply(
      Update(6, v1::PLAN_PHASE_PROPOSED, 5, {{"w0", 0}, {"w1", 1}}));
  ASSERT_TRUE(ack.has_value());
  EXPECT_EQ(ack->epoch, 6);
}

TEST_F(TransitionPhasesTest, ReadyAfterANewerProposalIsNotAcked) {
  MakeStable(1, 1);
  handler_.Apply(Update(2, v1::PLAN_PHASE_PROPOSED, 1, {{"w0", 0}, {"w1", 1}}));
  handler_.Apply(
      Update(2, v1::PLAN_PHASE_COMMITTED, 1, {{"w0", 0}, {"w1", 1}}));
  // Epoch 2 broke before it was stable: epoch 3 builds on epoch 1 again.
  auto prepared =
      handler_.Apply(Update(3, v1::PLAN_PHASE_PROPOSED, 1, {{"w1", 0}}));
  ASSERT_TRUE(prepared.has_value());
  EXPECT_EQ(runner_.proposed.back(), (std::pair<int64_t, int64_t>{3, 1}));
  EXPECT_FALSE(handler_.EpochReady(2).has_value());
}

TEST_F(TransitionPhasesTest, SenderOnlyEpochBecomesStableWithoutARank) {
  MakeStable(1, 1);
  handler_.Apply(Update(2, v1::PLAN_PHASE_PROPOSED, 1, {{"w0", 0}}));
  EXPECT_FALSE(
      handler_.Apply(Update(2, v1::PLAN_PHASE_COMMITTED, 1, {{"w0", 0}})));
  // Not listed: the ready callback acks nothing.
  EXPECT_FALSE(handler_.EpochReady(2).has_value());
  handler_.Apply(Update(2, v1::PLAN_PHASE_STABLE, 1, {{"w0", 0}}));
  EXPECT_EQ(handler_.stable_epoch(), 2);
  EXPECT_EQ(handler_.stable_rank(), -1);
  EXPECT_EQ(runner_.stable, (std::vector<int64_t>{1, 2}));
  EXPECT_FALSE(runner_.active());
}

TEST_F(TransitionPhasesTest, ProposalOnAMissedStableEpochAppliesItFirst) {
  handler_.Apply(Update(1, v1::PLAN_PHASE_PROPOSED, 0, {{"w0", 0}, {"w1", 1}}));
  handler_.Apply(
      Update(1, v1::PLAN_PHASE_COMMITTED, 0, {{"w0", 0}, {"w1", 1}}));
  ASSERT_TRUE(handler_.EpochReady(1).has_value());
  // STABLE 1 was never delivered; epoch 2 names it as its base.
  ASSERT_TRUE(handler_.Apply(
      Update(2, v1::PLAN_PHASE_PROPOSED, 1, {{"w0", 0}, {"w1", 1}})));
  EXPECT_EQ(runner_.stable, (std::vector<int64_t>{1}));
  EXPECT_EQ(handler_.stable_epoch(), 1);
  EXPECT_EQ(handler_.stable_rank(), 1);
  EXPECT_FALSE(runner_.active());  // paused after it
}

TEST_F(TransitionPhasesTest, ReadyAtOnceAcksAtOnce) {
  runner_.start = EpochStart::kReady;
  v1::PlanUpdate commit =
      Update(1, v1::PLAN_PHASE_COMMITTED, 0, {{"w0", 0}, {"w1", 1}});
  commit.set_resume_step(3);
  auto ack = handler_.Apply(commit);
  ASSERT_TRUE(ack.has_value());
  EXPECT_EQ(ack->phase, v1::ACK_PHASE_ACTIVE);
  EXPECT_EQ(ack->step, 3);
  EXPECT_TRUE(runner_.active());
}

}  // namespace
}  // namespace zshard::worker
