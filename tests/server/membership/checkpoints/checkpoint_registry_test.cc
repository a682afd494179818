// Checkpoint reports through the membership: completeness, coverage,
// rollback from the newest checkpoint after a lost range, and restore.
#include "server/membership/checkpoints/checkpoint_registry.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/membership/membership.h"
#include "tests/server/membership/membership_harness.h"
#include "tests/server/test_reports.h"

namespace zshard::server {
namespace {

using testing::HalfFile;
using testing::Harness;
using ::testing::HasSubstr;
using testing::Report;
using testing::Session;

TEST(CheckpointRegistryTest, CommitsOnlyWhenEveryFileIsIn) {
  Harness h(testing::TestJob(1, 2, 4));
  std::vector<CheckpointRecord> written;
  h.m_.reset();
  MembershipOptions options;
  options.write_manifest = [&](const CheckpointRecord& c) {
    written.push_back(c);
    return absl::OkStatus();
  };
  h.m_ = Membership::Create(h.spec_, &h.clock_, nullptr, options).value();
  h.Join("w0");
  h.Join("w1");
  EpochPlan p = h.Settle();
  Session r0 = h.SessionOf(p.slots[0].worker_id);
  Session r1 = h.SessionOf(p.slots[1].worker_id);
  auto first =
      h.m_->ReportCheckpoint(r0.id, r0.token, Report(p.epoch, 10, HalfFile(0)));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE(*first);
  EXPECT_TRUE(written.empty());
  EXPECT_TRUE(h.m_->Checkpoints().empty());
  // A rank reporting another rank's file is refused.
  EXPECT_EQ(
      h.m_->ReportCheckpoint(r0.id, r0.token, Report(p.epoch, 10, HalfFile(1)))
          .status()
          .code(),
      absl::StatusCode::kFailedPrecondition);
  auto second =
      h.m_->ReportCheckpoint(r1.id, r1.token, Report(p.epoch, 10, HalfFile(1)));
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_TRUE(*second);
  ASSERT_EQ(written.size(), 1u);
  EXPECT_EQ(written[0].step, 10);
  EXPECT_EQ(written[0].adam_step, 9);
  EXPECT_EQ(written[0].job, "demo");
  EXPECT_EQ(written[0].files.size(), 2u);
  EXPECT_EQ(written[0].bytes, 2000);
  EXPECT_THAT(written[0].param_names, ::testing::ElementsAre("a", "b"));
  EXPECT_THAT(written[0].param_numels, ::testing::ElementsAre(1000, 2100));
  ASSERT_EQ(h.m_->Checkpoints().size(), 1u);
  MembershipStats s = h.m_->Stats();
  EXPECT_EQ(s.checkpoints, 1);
  EXPECT_EQ(s.last_checkpoint_step, 10);
  EXPECT_GT(s.last_checkpoint_ms, 0);
  // An older step than the newest committed one is refused.
  EXPECT_EQ(
      h.m_->ReportCheckpoint(r0.id, r0.token, Report(p.epoch, 5, HalfFile(0)))
          .status()
          .code(),
      absl::StatusCode::kFailedPrecondition);
}

TEST(CheckpointRegistryTest, IncompleteCoverageAndBadReportsAreRefused) {
  job::JobSpec spec = testing::TestJob(1, 2, 4);
  CheckpointRegistry reg;
  CheckpointEpoch epoch{3, 2, 1, 1, {}};
  CheckpointFileInfo short1 = HalfFile(1);
  short1.ranges[1].end -= 1;  // b's last element is missing
  ASSERT_TRUE(reg.Add(Report(3, 10, HalfFile(0)), epoch, spec.model).ok());
  auto gap = reg.Add(Report(3, 10, short1), epoch, spec.model);
  EXPECT_EQ(gap.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(gap.status().message()),
              HasSubstr("param 'b' (expert rank 0) element 2099"));
  CheckpointFileInfo bad = HalfFile(0);
  bad.path = "../escape";
  EXPECT_EQ(reg.Add(Report(3, 20, bad), epoch, spec.model).status().code(),
            absl::StatusCode::kInvalidArgument);
  bad = HalfFile(0);
  bad.rank = 2;  // not in instance 0 of a world of 2 with I = 1... D = 2
  EXPECT_EQ(reg.Add(Report(3, 20, bad), epoch, spec.model).status().code(),
            absl::StatusCode::kInvalidArgument);
  bad = HalfFile(0);
  bad.ranges[0].end = 1001;
  EXPECT_EQ(reg.Add(Report(3, 20, bad), epoch, spec.model).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(reg.Newest(), nullptr);
}

TEST(CheckpointRegistryTest, LostRangeRollsBackToTheNewestCheckpoint) {
  Harness h(testing::TestJob(1, 1, 4));
  h.Join("w0");
  h.Join("w1");
  EpochPlan p = h.Settle();
  ASSERT_EQ(p.world, 2);
  for (int r = 0; r < 2; ++r) {
    Session s = h.SessionOf(p.slots[r].worker_id);
    ASSERT_TRUE(
        h.m_->ReportCheckpoint(s.id, s.token, Report(p.epoch, 10, HalfFile(r)))
            .ok());
  }
  h.Updates();
  const std::string victim = h.NameAtRank(1);
  h.Kill(victim);
  std::vector<PlanUpdate> u = h.Updates();
  ASSERT_EQ(u.size(), 1u);
  const EpochPlan& q = u[0].plan;
  EXPECT_EQ(q.world, 1);
  ASSERT_TRUE(q.restore.active());
  EXPECT_EQ(q.restore.step, 10);
  EXPECT_EQ(q.restore.adam_step, 9);
  EXPECT_EQ(q.restore.dir, "/ckpt/step-10");
  EXPECT_EQ(q.summary.bytes_from_checkpoint, q.summary.bytes_moved);
  EXPECT_EQ(q.summary.bytes_moved, 12 * (1000 + 2100));
  for (const plan::Move& m : q.moves) {
    EXPECT_EQ(m.source_rank, -1);
    EXPECT_TRUE(m.source_member.empty());
    EXPECT_EQ(m.checkpoint_file, m.begin < (m.param_index == 0 ? 500 : 1050)
                                     ? "rank-00000.zsc"
                                     : "rank-00001.zsc");
  }
  bool rollback = false;
  for (const Event& e : h.m_->events()->After(0, 1000).events) {
    rollback |= e.kind == "rollback";
  }
  EXPECT_TRUE(rollback);
  // The survivor acks some later step: the checkpoint's step wins.
  Session s0 = h.SessionOf(q.slots[0].worker_id);
  ASSERT_TRUE(h.m_->AckPrepared(s0.id, s0.token, q.epoch, 14, true).ok());
  EpochPlan c = h.m_->CommittedPlan();
  EXPECT_EQ(c.epoch, q.epoch);
  EXPECT_EQ(c.resume_step, 10);
  EXPECT_EQ(c.resume_adam_step, 9);
  ASSERT_EQ(h.m_->ReshardHistory(1).size(), 1u);
  EXPECT_EQ(h.m_->ReshardHistory(1)[0].restored_step, 10);
}

TEST(CheckpointRegistryTest, RestoreMakesTheFirstEpochLoadEverything) {
  job::JobSpec spec = testing::TestJob(2, 2, 4);
  FakeClock clock(1000);
  MembershipOptions options;
  CheckpointRecord c;
  c.step = 30;
  c.adam_step = 28;
  c.dir = "/old/step-30";
  c.world = 2;
  c.instances = 1;
  c.files = {HalfFile(0), HalfFile(1)};
  options.restore = c;
  auto m = Membership::Create(spec, &clock, nullptr, options).value();
  JoinArgs a;
  a.name = "w0";
  auto j0 = m->Join(a).value();
  a.name = "w1";
  auto j1 = m->Join(a).value();
  WatchBatch b = m->WaitForUpdates(-1, absl::ZeroDuration());
  ASSERT_EQ(b.updates.size(), 1u);
  const EpochPlan& p = b.updates[0]->plan;
  EXPECT_EQ(p.base_epoch, 0);
  ASSERT_TRUE(p.restore.active());
  EXPECT_EQ(p.restore.step, 30);
  // keep_d (the default at I = 2): world 2 is one instance of D = 2, which
  // loads one full copy.
  EXPECT_EQ(p.instances, 1);
  EXPECT_EQ(p.summary.bytes_moved, 12 * (1000 + 2100));
  ASSERT_TRUE(m->AckPrepared(j0.worker_id, j0.token, p.epoch, 0, false).ok());
  ASSERT_TRUE(m->AckPrepared(j1.worker_id, j1.token, p.epoch, 0, false).ok());
  EXPECT_EQ(m->CommittedPlan().resume_step, 30);
  EXPECT_EQ(m->CommittedPlan().resume_adam_step, 28);
  bool restore = false;
  for (const Event& e : m->events()->After(0, 100).events) {
    restore |= e.kind == "restore";
  }
  EXPECT_TRUE(restore);
  EXPECT_EQ(m->Stats().last_checkpoint_step, 30);
}

}  // namespace
}  // namespace zshard::server
