// Transitions that cannot complete, with a fake clock: a member that cannot
// prepare the committed epoch (a damaged checkpoint falls back to the newest
// older intact one; without one the job fails as lost; any other failure
// gets a new proposal), phases that time out, and failed checkpoint writes.
#include <string>
#include <vector>

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

std::vector<Event> EventsOf(Membership& m, const std::string& kind) {
  std::vector<Event> out;
  for (const Event& e : m.events()->After(0, 1000).events) {
    if (e.kind == kind) out.push_back(e);
  }
  return out;
}

// The newest proposal among the updates since the last call.
EpochPlan LastProposal(Harness& h) {
  EpochPlan p;
  for (const PlanUpdate& u : h.Updates()) {
    if (u.phase == PlanPhase::kProposed) p = u.plan;
  }
  return p;
}

// Commits proposal `p` (PREPARED from every participant).
void Commit(Harness& h, const EpochPlan& p) {
  for (const Session& s : h.Participants(p)) {
    ASSERT_TRUE(h.m_->AckPrepared(s.id, s.token, p.epoch, 0, true).ok());
  }
  ASSERT_EQ(h.m_->CommittedPlan().epoch, p.epoch);
}

// World 2, I = 1, with committed checkpoints of steps 10 and 20; then the
// rank 1 holder dies, so the next epoch rolls back to step 20.
class RollbackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    h_.Join("w0");
    h_.Join("w1");
    h_.Join("w2");  // a spare: the world can stay at 2
    EpochPlan p = h_.Settle();
    ASSERT_EQ(p.world, 2);
    for (int64_t step : {10, 20}) {
      for (int r = 0; r < 2; ++r) {
        Session s = h_.SessionOf(p.slots[r].worker_id);
        ASSERT_TRUE(h_.m_
                        ->ReportCheckpoint(s.id, s.token,
                                           Report(p.epoch, step, HalfFile(r)))
                        .ok());
      }
    }
    h_.Updates();
    victim_ = h_.NameAtRank(1);
    h_.Kill(victim_);
    rollback_ = LastProposal(h_);
    ASSERT_TRUE(rollback_.restore.active());
    ASSERT_EQ(rollback_.restore.step, 20);
    Commit(h_, rollback_);
  }

  Harness h_{testing::TestJob(1, 2, 2)};
  std::string victim_;
  EpochPlan rollback_;
};

TEST_F(RollbackTest, DamagedCheckpointFallsBackToTheOlderOne) {
  Session s = h_.SessionOf(rollback_.slots[0].worker_id);
  PrepareFailure f;
  f.error = "checkpoint file /ckpt/step-20/rank-00001.zsc: checksum mismatch";
  f.source = "/ckpt/step-20";
  f.source_is_checkpoint = true;
  auto phase = h_.m_->AckFailed(s.id, s.token, rollback_.epoch, f);
  ASSERT_TRUE(phase.ok()) << phase.status();

  std::vector<Event> failed = EventsOf(*h_.m_, "prepare_failed");
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_THAT(failed[0].reason, HasSubstr("checksum mismatch"));
  EXPECT_THAT(failed[0].reason, HasSubstr("source /ckpt/step-20"));
  std::vector<Event> skipped = EventsOf(*h_.m_, "checkpoint_skipped");
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_THAT(skipped[0].reason, HasSubstr("step 20"));
  EXPECT_THAT(skipped[0].reason, HasSubstr("restoring from step 10"));

  // A new proposal restores from step 10, and it commits and goes stable.
  EpochPlan again = LastProposal(h_);
  ASSERT_GT(again.epoch, rollback_.epoch);
  ASSERT_TRUE(again.restore.active());
  EXPECT_EQ(again.restore.step, 10);
  EXPECT_EQ(again.restore.dir, "/ckpt/step-10");
  h_.proposed_ = again;
  EpochPlan stable = h_.Settle();
  EXPECT_EQ(stable.epoch, again.epoch);
  EXPECT_EQ(stable.resume_step, 10);
  EXPECT_EQ(h_.m_->StablePlan().epoch, again.epoch);
  EXPECT_EQ(h_.m_->Stats().prepare_failures, 1);

  // The damaged checkpoint is listed as incomplete, never used again.
  ASSERT_EQ(h_.m_->Checkpoints().size(), 1u);
  EXPECT_EQ(h_.m_->Checkpoints()[0].step, 10);
  std::vector<CheckpointAttempt> bad = h_.m_->IncompleteCheckpoints();
  ASSERT_EQ(bad.size(), 1u);
  EXPECT_EQ(bad[0].step, 20);
  EXPECT_THAT(bad[0].failures[0], HasSubstr("damaged: checkpoint file"));
}

TEST_F(RollbackTest, NoIntactCheckpointLeftFailsTheJobAsLost) {
  Session s = h_.SessionOf(rollback_.slots[0].worker_id);
  PrepareFailure f;
  f.error = "damaged";
  f.source_is_checkpoint = true;
  ASSERT_TRUE(h_.m_->AckFailed(s.id, s.token, rollback_.epoch, f).ok());
  EpochPlan again = LastProposal(h_);
  ASSERT_EQ(again.restore.step, 10);
  Commit(h_, again);
  ASSERT_TRUE(h_.m_->AckFailed(s.id, s.token, again.epoch, f).ok());
  std::vector<Event> lost = EventsOf(*h_.m_, "lost");
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_THAT(lost[0].reason, HasSubstr("no older intact checkpoint"));
  EXPECT_THAT(h_.m_->FailureReason(), HasSubstr("the job cannot go on"));
  EXPECT_EQ(LastProposal(h_).epoch, 0);  // nothing more is proposed
}

TEST(TransitionFailuresTest, OtherPreparationFailureGetsANewProposal) {
  Harness h(testing::TestJob(2, 2, 4));
  for (int i = 0; i < 5; ++i) h.Join("w" + std::to_string(i));
  EpochPlan stable = h.Settle();
  ASSERT_EQ(stable.world, 4);
  h.Updates();
  const std::string victim = h.NameAtRank(2);
  h.Kill(victim);
  EpochPlan p = LastProposal(h);
  ASSERT_FALSE(p.moves.empty());
  Commit(h, p);
  Session s = h.SessionOf(p.slots[2].worker_id);
  PrepareFailure f;
  f.error = "move from rank 0 failed: connection reset";
  f.source = stable.slots[0].worker_id;
  ASSERT_TRUE(h.m_->AckFailed(s.id, s.token, p.epoch, f).ok());
  // Reported twice: one event.
  ASSERT_TRUE(h.m_->AckFailed(s.id, s.token, p.epoch, f).ok());
  EXPECT_EQ(EventsOf(*h.m_, "prepare_failed").size(), 1u);
  EpochPlan again = LastProposal(h);
  ASSERT_GT(again.epoch, p.epoch);
  EXPECT_EQ(again.base_epoch, stable.epoch);  // planned from the stable one
  EXPECT_FALSE(again.restore.active());
  h.proposed_ = again;
  EXPECT_EQ(h.Settle().epoch, again.epoch);
  EXPECT_EQ(h.m_->StablePlan().epoch, again.epoch);
  // A stale or stable epoch is refused.
  EXPECT_EQ(h.m_->AckFailed(s.id, s.token, again.epoch, f).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(TransitionFailuresTest, AFailedSourceIsAvoidedWhereAnotherHolderExists) {
  Harness h(testing::TestJob(3, 3, 3));  // D = 1: three full replicas
  for (int i = 0; i < 4; ++i) h.Join("w" + std::to_string(i));
  EpochPlan stable = h.Settle();
  ASSERT_EQ(stable.world, 3);
  h.Updates();
  const std::string victim = h.NameAtRank(1);
  h.Kill(victim);
  EpochPlan p = LastProposal(h);
  ASSERT_FALSE(p.moves.empty());
  const std::string source = p.moves[0].source_member;
  ASSERT_FALSE(source.empty());
  Commit(h, p);
  Session s = h.SessionOf(p.slots[1].worker_id);
  PrepareFailure f;
  f.error = "move from " + source + " failed: checksum mismatch";
  f.source = source;
  ASSERT_TRUE(h.m_->AckFailed(s.id, s.token, p.epoch, f).ok());
  EpochPlan again = LastProposal(h);
  ASSERT_GT(again.epoch, p.epoch);
  ASSERT_FALSE(again.moves.empty());
  // The avoided member's own ranges count as not held either: they come
  // from another replica too, so more bytes move than the first time.
  EXPECT_GE(again.summary.bytes_moved, p.summary.bytes_moved);
  for (const plan::Move& m : again.moves) {
    EXPECT_NE(m.source_member, source);
    EXPECT_FALSE(m.source_member.empty());
  }
  h.proposed_ = again;
  EXPECT_EQ(h.Settle().epoch, again.epoch);
}

TEST(TransitionFailuresTest, SilentPreparedAcksTimeOutAndAreProposedAgain) {
  job::JobSpec spec = testing::TestJob(1, 2, 4);
  ASSERT_EQ(spec.transition_timeout_ms, 4 * spec.lease_timeout_ms);
  spec.transition_timeout_ms = 8000;
  Harness h(spec);
  h.Join("w0");
  h.Join("w1");
  EpochPlan p = LastProposal(h);
  ASSERT_EQ(p.world, 2);
  Session s0 = h.SessionOf(p.slots[0].worker_id);
  ASSERT_TRUE(h.m_->AckPrepared(s0.id, s0.token, p.epoch, 0, false).ok());
  // Both keep their leases; one never acks.
  for (int i = 0; i < 4; ++i) {
    h.clock_.AdvanceMs(1900);
    h.BeatAll();
    h.m_->Tick();
  }
  EXPECT_TRUE(EventsOf(*h.m_, "timeout").empty());  // 7,600 ms: not yet
  h.clock_.AdvanceMs(1900);
  h.BeatAll();
  h.m_->Tick();
  std::vector<Event> timeout = EventsOf(*h.m_, "timeout");
  ASSERT_EQ(timeout.size(), 1u);
  EXPECT_THAT(
      timeout[0].reason,
      HasSubstr("no PREPARED ack within 8000 ms from " + p.slots[1].name));
  EXPECT_EQ(EventsOf(*h.m_, "abandon").size(), 1u);
  EpochPlan again = LastProposal(h);
  EXPECT_GT(again.epoch, p.epoch);
  EXPECT_EQ(h.m_->Stats().transition_timeouts, 1);
  h.proposed_ = again;
  EXPECT_EQ(h.Settle().epoch, again.epoch);
}

TEST(TransitionFailuresTest, SilentActiveAcksTimeOutAndAreProposedAgain) {
  job::JobSpec spec = testing::TestJob(1, 2, 4);
  spec.transition_timeout_ms = 8000;
  Harness h(spec);
  h.Join("w0");
  h.Join("w1");
  EpochPlan p = LastProposal(h);
  Commit(h, p);
  Session s0 = h.SessionOf(p.slots[0].worker_id);
  ASSERT_TRUE(h.m_->AckActive(s0.id, s0.token, p.epoch).ok());
  for (int i = 0; i < 5; ++i) {
    h.clock_.AdvanceMs(1900);
    h.BeatAll();
    h.m_->Tick();
  }
  std::vector<Event> timeout = EventsOf(*h.m_, "timeout");
  ASSERT_EQ(timeout.size(), 1u);
  EXPECT_THAT(
      timeout[0].reason,
      HasSubstr("no ACTIVE ack within 8000 ms from " + p.slots[1].name));
  EpochPlan again = LastProposal(h);
  EXPECT_GT(again.epoch, p.epoch);
  h.proposed_ = again;
  EXPECT_EQ(h.Settle().epoch, again.epoch);
  EXPECT_EQ(h.m_->StablePlan().epoch, again.epoch);
}

TEST(TransitionFailuresTest, FailedCheckpointWriteIsAnEventAndIncomplete) {
  Harness h(testing::TestJob(1, 2, 2));
  h.Join("w0");
  h.Join("w1");
  EpochPlan p = h.Settle();
  Session s0 = h.SessionOf(p.slots[0].worker_id);
  Session s1 = h.SessionOf(p.slots[1].worker_id);
  ASSERT_TRUE(
      h.m_->ReportCheckpoint(s0.id, s0.token, Report(p.epoch, 10, HalfFile(0)))
          .ok());
  CheckpointReport failed = Report(p.epoch, 10, HalfFile(1));
  failed.file = CheckpointFileInfo();
  failed.file.rank = 1;
  failed.error = "cannot create directory '/ckpt/step-10': Read-only";
  auto r = h.m_->ReportCheckpoint(s1.id, s1.token, failed);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(*r);
  std::vector<Event> events = EventsOf(*h.m_, "checkpoint_failed");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_THAT(events[0].reason, HasSubstr("step 10 rank 1"));
  EXPECT_THAT(events[0].reason, HasSubstr("Read-only"));
  EXPECT_EQ(h.m_->Stats().checkpoint_failures, 1);
  EXPECT_TRUE(h.m_->Checkpoints().empty());  // no manifest
  std::vector<CheckpointAttempt> attempts = h.m_->IncompleteCheckpoints();
  ASSERT_EQ(attempts.size(), 1u);
  EXPECT_EQ(attempts[0].step, 10);
  EXPECT_EQ(attempts[0].files_reported, 1);
  EXPECT_EQ(attempts[0].files_expected, 2);
  ASSERT_EQ(attempts[0].failures.size(), 1u);
  EXPECT_THAT(attempts[0].failures[0], HasSubstr("rank 1: cannot create"));
  // A later complete checkpoint commits; the failed attempt stays listed.
  for (const Session& s : {s0, s1}) {
    const int rank = s.id == s0.id ? 0 : 1;
    ASSERT_TRUE(h.m_->ReportCheckpoint(s.id, s.token,
                                       Report(p.epoch, 20, HalfFile(rank)))
                    .ok());
  }
  ASSERT_EQ(h.m_->Checkpoints().size(), 1u);
  attempts = h.m_->IncompleteCheckpoints();
  ASSERT_EQ(attempts.size(), 1u);
  EXPECT_EQ(attempts[0].step, 10);
}

// A training step failed in the stable epoch while every member lives:
// one event per epoch, and once every member has heartbeated since the
// report, the same world is proposed again. Until then (a member silent:
// its lease decides) nothing is proposed.
TEST(StepFailureTest, TheSameWorldAgainOnceEveryMemberHeartbeated) {
  Harness h;
  Session a = h.Join("w0");
  Session b = h.Join("w1");
  const EpochPlan stable = h.Settle(0);
  ASSERT_GT(stable.epoch, 0);
  h.Updates();
  PrepareFailure f;
  f.error = "collective timed out";
  f.step = 7;
  auto phase = h.m_->AckFailed(a.id, a.token, stable.epoch, f);
  ASSERT_TRUE(phase.ok()) << phase.status();
  EXPECT_EQ(*phase, PlanPhase::kStable);
  std::vector<Event> failed = EventsOf(*h.m_, "step_failed");
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_THAT(failed[0].reason,
              HasSubstr("step 7 failed on member w0: collective timed out"));
  ASSERT_TRUE(h.m_->AckFailed(b.id, b.token, stable.epoch, f).ok());
  EXPECT_EQ(EventsOf(*h.m_, "step_failed").size(), 1u);

  h.clock_.AdvanceMs(100);
  h.Beat("w0");
  h.m_->Tick();
  EXPECT_TRUE(EventsOf(*h.m_, "replan").empty());
  EXPECT_EQ(LastProposal(h).epoch, 0);
  h.Beat("w1");
  h.m_->Tick();
  std::vector<Event> replan = EventsOf(*h.m_, "replan");
  ASSERT_EQ(replan.size(), 1u);
  EXPECT_THAT(replan[0].reason, HasSubstr("every member is alive"));
  const EpochPlan again = LastProposal(h);
  EXPECT_EQ(again.epoch, stable.epoch + 1);
  ASSERT_EQ(again.world, stable.world);
  for (int r = 0; r < again.world; ++r) {
    EXPECT_EQ(again.slots[r].worker_id, stable.slots[r].worker_id);
  }
  // Committed and stable again: nothing more is proposed.
  h.Settle(7);
  h.m_->Tick();
  EXPECT_EQ(LastProposal(h).epoch, 0);
  EXPECT_EQ(EventsOf(*h.m_, "replan").size(), 1u);
}

}  // namespace
}  // namespace zshard::server
