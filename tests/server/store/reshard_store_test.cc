// Re-sharding state across a coordinator restart, over both stores (real
// SQLite in a temp dir, a real etcd started by the test): the stable epoch, a
// committed epoch's moves, checkpoints, the reshard history and a failed job
// survive; --restore needs a fresh dir.
#include <stdlib.h>

#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/store/sqlite_state_store.h"
#include "server/store/store_json.h"
#include "tests/server/membership/membership_harness.h"
#include "tests/server/store/store_backends.h"

namespace zshard::server {
namespace {

using testing::StoreKind;

class ReshardStoreTest : public testing::StoreParamTest {};

CheckpointReport Half(int64_t epoch, int rank) {
  CheckpointReport r;
  r.epoch = epoch;
  r.step = 20;
  r.adam_step = 20;
  r.dir = "/ckpt/step-20";
  r.file.path = "rank-" + std::to_string(rank);
  r.file.rank = rank;
  r.file.bytes = 10;
  r.file.ranges = {{0, 0, rank * 500, (rank + 1) * 500},
                   {1, 0, rank * 1050, (rank + 1) * 1050}};
  return r;
}

TEST_P(ReshardStoreTest, RestartRestoresStableEpochMovesCheckpointsHistory) {
  EpochPlan stable, committed;
  std::vector<ReshardRecord> history;
  {
    auto store = Open();
    ASSERT_NE(store, nullptr);
    testing::Harness h(testing::TestJob(1, 2, 4), store.get());
    for (int i = 0; i < 2; ++i) h.Join("w" + std::to_string(i));
    stable = h.Settle(20);
    for (int r = 0; r < 2; ++r) {
      testing::Session s = h.SessionOf(stable.slots[r].worker_id);
      auto done = h.m_->ReportCheckpoint(s.id, s.token, Half(stable.epoch, r));
      ASSERT_TRUE(done.ok()) << done.status();
      EXPECT_EQ(*done, r == 1);
    }
    h.Join("w2");  // grows to 3: committed, not stable
    EpochPlan p;
    for (const PlanUpdate& u : h.Updates()) p = u.plan;
    ASSERT_EQ(p.world, 3);
    for (const testing::Session& s : h.Participants(p)) {
      ASSERT_TRUE(h.m_->AckPrepared(s.id, s.token, p.epoch, 21, true).ok());
    }
    committed = h.m_->CommittedPlan();
    ASSERT_EQ(committed.epoch, p.epoch);
    ASSERT_FALSE(committed.moves.empty());
    history = h.m_->ReshardHistory(0);
  }
  auto store = Open();
  ASSERT_NE(store, nullptr);
  FakeClock clock(90000);
  auto m = Membership::Create(testing::TestJob(1, 2, 4), &clock, store.get())
               .value();
  EXPECT_EQ(m->StablePlan().epoch, stable.epoch);
  EpochPlan c = m->CommittedPlan();
  EXPECT_EQ(c.epoch, committed.epoch);
  EXPECT_EQ(c.resume_step, 21);
  EXPECT_EQ(c.base_epoch, stable.epoch);
  ASSERT_EQ(c.moves.size(), committed.moves.size());
  for (size_t i = 0; i < c.moves.size(); ++i) {
    EXPECT_EQ(c.moves[i].source_member, committed.moves[i].source_member);
    EXPECT_EQ(c.moves[i].dest_member, committed.moves[i].dest_member);
    EXPECT_EQ(c.moves[i].begin, committed.moves[i].begin);
    EXPECT_EQ(c.moves[i].end, committed.moves[i].end);
    EXPECT_EQ(c.moves[i].param_index, committed.moves[i].param_index);
  }
  EXPECT_EQ(c.summary.bytes_moved, committed.summary.bytes_moved);
  // A re-attaching watcher replays COMMITTED with the moves.
  WatchBatch b = m->WaitForUpdates(-1, absl::ZeroDuration());
  ASSERT_FALSE(b.updates.empty());
  EXPECT_EQ(b.updates[0]->phase, PlanPhase::kCommitted);
  EXPECT_EQ(b.updates[0]->plan.moves.size(), committed.moves.size());
  ASSERT_EQ(m->Checkpoints().size(), 1u);
  EXPECT_EQ(m->Checkpoints()[0].step, 20);
  EXPECT_EQ(m->Checkpoints()[0].files.size(), 2u);
  EXPECT_EQ(m->Stats().last_checkpoint_step, 20);
  std::vector<ReshardRecord> h2 = m->ReshardHistory(0);
  ASSERT_EQ(h2.size(), history.size());
  for (size_t i = 0; i < h2.size(); ++i) {
    EXPECT_EQ(h2[i].epoch, history[i].epoch);
    EXPECT_EQ(h2[i].outcome, history[i].outcome);
    EXPECT_EQ(h2[i].bytes_moved, history[i].bytes_moved);
  }
  // --restore into a state dir that holds the job is refused.
  MembershipOptions options;
  options.restore = m->Checkpoints()[0];
  auto again = Membership::Create(testing::TestJob(1, 2, 4), &clock,
                                  store.get(), options);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(again.status().message()),
              ::testing::HasSubstr("fresh state dir"));
}

TEST_P(ReshardStoreTest, FailedJobStaysFailedAfterRestart) {
  std::string reason;
  {
    auto store = Open();
    ASSERT_NE(store, nullptr);
    testing::Harness h(testing::TestJob(1, 2, 4), store.get());
    for (int i = 0; i < 3; ++i) h.Join("w" + std::to_string(i));
    h.Settle();
    h.clock_.AdvanceMs(6000);
    h.BeatAll("w1");
    h.m_->Tick();
    reason = h.m_->FailureReason();
    ASSERT_FALSE(reason.empty());
  }
  auto store = Open();
  ASSERT_NE(store, nullptr);
  FakeClock clock(90000);
  auto m = Membership::Create(testing::TestJob(1, 2, 4), &clock, store.get())
               .value();
  EXPECT_EQ(m->FailureReason(), reason);
}

INSTANTIATE_TEST_SUITE_P(Stores, ReshardStoreTest,
                         ::testing::ValuesIn(testing::kStoreKinds),
                         testing::StoreKindName);

TEST(StoreJsonTest, MovesJsonReadsOldAndNewForms) {
  plan::Move m;
  m.source_rank = 1;
  m.dest_rank = 2;
  m.source_member = "w-a";
  m.dest_member = "w-b";
  m.param_index = 3;
  m.begin = 10;
  m.end = 15;
  m.checkpoint_file = "f";
  std::vector<plan::Move> back = MovesFromJson(MovesJson({m}));
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].dest_member, "w-b");
  EXPECT_EQ(back[0].end, 15);
  EXPECT_EQ(back[0].checkpoint_file, "f");
  std::vector<plan::Move> old = MovesFromJson("[[0,1,0,2,64,100]]");
  ASSERT_EQ(old.size(), 1u);
  EXPECT_EQ(old[0].dest_offset_in_bucket, 64);
  EXPECT_EQ(old[0].elements(), 100);
  EXPECT_TRUE(MovesFromJson("not json").empty());
}

// A model-parallel checkpoint keeps its sizes, its slots' param counts and
// each file's slot through the store; an older record reads as one slot.
TEST(StoreJsonTest, CheckpointJsonKeepsTheSlots) {
  CheckpointRecord c;
  c.step = 20;
  c.tensor = 2;
  c.pipeline = 2;
  c.context = 2;
  c.slot_params = {1, 2, 1, 2};
  CheckpointFileInfo f;
  f.path = "slot-3/rank-00001.zsc";
  f.rank = 1;
  f.slot = 3;
  f.ranges = {{1, 0, 0, 5}};
  c.files = {f};
  CheckpointRecord back;
  ASSERT_TRUE(CheckpointFromJson(CheckpointJson(c), &back));
  EXPECT_EQ(CheckpointJson(back), CheckpointJson(c));
  EXPECT_EQ(back.tensor, 2);
  EXPECT_EQ(back.context, 2);
  EXPECT_THAT(back.slot_params, ::testing::ElementsAre(1, 2, 1, 2));
  ASSERT_EQ(back.files.size(), 1u);
  EXPECT_EQ(back.files[0].slot, 3);
  CheckpointRecord old;
  ASSERT_TRUE(
      CheckpointFromJson(R"({"step": 5, "files": [{"path": "r"}]})", &old));
  EXPECT_EQ(old.tensor, 1);
  EXPECT_EQ(old.pipeline, 1);
  EXPECT_TRUE(old.slot_params.empty());
  EXPECT_EQ(old.files[0].slot, 0);
}

}  // namespace
}  // namespace zshard::server
