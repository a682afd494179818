// Live re-sharding in the membership state machine with a fake clock and
// the real planner: moves at proposal, senders' PREPARED acks, STABLE,
// hand-over on leave, lost ranges and the job failure.
#include <numeric>

#include "common/plan/ownership.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/membership/membership.h"
#include "tests/server/membership/membership_harness.h"

namespace zshard::server {
namespace {

using testing::Harness;
using ::testing::HasSubstr;
using testing::Session;

// Elements of state rank `rank` owns in `epoch`.
int64_t OwnedElements(const job::JobSpec& spec, const EpochPlan& epoch,
                      int rank) {
  auto p = plan::MakePlan(spec.model, job::JobPlanOptions(spec, epoch.world));
  std::vector<plan::Member> members;
  for (int r = 0; r < epoch.world; ++r) {
    members.push_back({epoch.slots[r].worker_id, ""});
  }
  auto own = plan::MakeOwnership(spec.model, *p, members);
  int64_t n = 0;
  for (const plan::OwnedRange& r : own->ranges)
    n += r.rank == rank ? r.size() : 0;
  return n;
}

std::vector<PlanUpdate> Phase(const std::vector<PlanUpdate>& u, PlanPhase p) {
  std::vector<PlanUpdate> out;
  for (const PlanUpdate& x : u) {
    if (x.phase == p) out.push_back(x);
  }
  return out;
}

std::vector<Event> EventsOf(Membership& m, const std::string& kind) {
  std::vector<Event> out;
  for (const Event& e : m.events()->After(0, 1000).events) {
    if (e.kind == kind) out.push_back(e);
  }
  return out;
}

TEST(ReshardTest, FirstEpochHasNoMoves) {
  Harness h;
  h.Join("w0");
  h.Join("w1");
  std::vector<PlanUpdate> u = h.Updates();
  ASSERT_EQ(u.size(), 1u);
  EXPECT_TRUE(u[0].plan.moves.empty());
  EXPECT_EQ(u[0].plan.base_epoch, 0);
  EXPECT_FALSE(u[0].plan.restore.active());
}

TEST(ReshardTest, SpareTakeoverMovesOnlyTheLostRankFromTheOtherInstance) {
  Harness h;  // I = 2, world in [2, 4]
  for (int i = 0; i < 5; ++i) h.Join("w" + std::to_string(i));
  EpochPlan stable = h.Settle();
  ASSERT_EQ(stable.world, 4);
  h.Updates();
  const std::string victim = h.NameAtRank(2);
  h.Kill(victim);
  std::vector<PlanUpdate> proposed = Phase(h.Updates(), PlanPhase::kProposed);
  ASSERT_EQ(proposed.size(), 1u);
  const EpochPlan& p = proposed[0].plan;
  EXPECT_EQ(p.base_epoch, stable.epoch);
  EXPECT_EQ(p.slots[2].name, "w4");
  ASSERT_FALSE(p.moves.empty());
  const int64_t elements = OwnedElements(h.spec_, stable, 2);
  EXPECT_EQ(p.summary.bytes_moved, 12 * elements);
  EXPECT_EQ(p.summary.lower_bound_bytes, p.summary.bytes_moved);
  EXPECT_EQ(p.summary.moves, static_cast<int>(p.moves.size()));
  int64_t sum = 0;
  for (const plan::Move& m : p.moves) {
    EXPECT_EQ(m.dest_rank, 2);
    EXPECT_EQ(m.dest_member, p.slots[2].worker_id);
    EXPECT_EQ(m.source_rank, 0);  // shard 0 of instance 0
    EXPECT_EQ(m.source_member, stable.slots[0].worker_id);
    EXPECT_EQ(m.elements(), m.end - m.begin);
    EXPECT_TRUE(m.checkpoint_file.empty());
    sum += m.elements();
  }
  EXPECT_EQ(sum, elements);
  std::vector<Event> moves = EventsOf(*h.m_, "moves");
  ASSERT_FALSE(moves.empty());
  EXPECT_THAT(moves.back().reason,
              HasSubstr(absl::StrCat(p.moves.size(), " moves, ", 12 * elements,
                                     " bytes (lower bound ", 12 * elements,
                                     "), 0 from checkpoint")));
}

TEST(ReshardTest, JoinBelowMaxGrowsWithMovesAtTheLowerBound) {
  Harness h(testing::TestJob(1, 2, 4));
  for (int i = 0; i < 3; ++i) h.Join("w" + std::to_string(i));
  EpochPlan three = h.Settle();
  ASSERT_EQ(three.world, 3);
  h.Updates();
  const MembershipStats before = h.m_->Stats();
  h.Join("w3");
  std::vector<PlanUpdate> u = Phase(h.Updates(), PlanPhase::kProposed);
  ASSERT_EQ(u.size(), 1u);
  const EpochPlan p = u[0].plan;
  h.proposed_ = p;
  EXPECT_EQ(p.world, 4);
  EXPECT_EQ(p.world_before, 3);
  EXPECT_EQ(p.base_epoch, three.epoch);
  EXPECT_GT(p.summary.bytes_moved, 0);
  EXPECT_EQ(p.summary.bytes_moved, p.summary.lower_bound_bytes);
  EpochPlan four = h.Settle(5);
  EXPECT_EQ(four.world, 4);
  EXPECT_EQ(four.resume_step, 5);
  EXPECT_EQ(h.m_->Stats().reshards, before.reshards + 1);
  EXPECT_EQ(h.m_->Stats().reshard_bytes,
            before.reshard_bytes + p.summary.bytes_moved);
}

TEST(ReshardTest, StableIsPublishedAfterTheLastActiveAck) {
  Harness h(testing::TestJob(1, 2, 4));
  for (int i = 0; i < 2; ++i) h.Join("w" + std::to_string(i));
  EpochPlan two = h.Settle();
  h.Updates();
  Session w2 = h.Join("w2");
  EpochPlan p = Phase(h.Updates(), PlanPhase::kProposed).at(0).plan;
  for (const Session& s : h.Participants(p)) {
    ASSERT_TRUE(h.m_->AckPrepared(s.id, s.token, p.epoch, 4, true).ok());
  }
  std::vector<PlanUpdate> committed = Phase(h.Updates(), PlanPhase::kCommitted);
  ASSERT_EQ(committed.size(), 1u);
  EXPECT_FALSE(committed[0].plan.moves.empty());  // moves ride along
  // A new watcher sees COMMITTED with the moves until the epoch is stable.
  WatchBatch snap = h.m_->WaitForUpdates(-1, absl::ZeroDuration());
  ASSERT_EQ(snap.updates.size(), 1u);
  EXPECT_EQ(snap.updates[0]->phase, PlanPhase::kCommitted);
  EXPECT_EQ(snap.updates[0]->plan.moves.size(), committed[0].plan.moves.size());
  EXPECT_EQ(h.m_->StablePlan().epoch, two.epoch);
  h.clock_.AdvanceMs(250);
  for (int r = 0; r < p.world; ++r) {
    Session s = h.SessionOf(p.slots[r].worker_id);
    auto phase = h.m_->AckActive(s.id, s.token, p.epoch);
    ASSERT_TRUE(phase.ok());
    EXPECT_EQ(*phase,
              r + 1 < p.world ? PlanPhase::kCommitted : PlanPhase::kStable);
    if (r + 1 < p.world) {
      EXPECT_TRUE(h.Updates().empty());
    }
  }
  std::vector<PlanUpdate> stable = Phase(h.Updates(), PlanPhase::kStable);
  ASSERT_EQ(stable.size(), 1u);
  EXPECT_EQ(stable[0].plan.epoch, p.epoch);
  EXPECT_EQ(h.m_->StablePlan().epoch, p.epoch);
  std::vector<Event> ev = EventsOf(*h.m_, "stable");
  ASSERT_FALSE(ev.empty());
  EXPECT_THAT(ev.back().reason, HasSubstr("250 ms after the commit"));
  EXPECT_DOUBLE_EQ(h.m_->Stats().last_reshard_seconds, 0.25);
  (void)w2;
}

TEST(ReshardTest, FailureBetweenCommitAndStableKeepsTheOldStableBase) {
  Harness h(testing::TestJob(1, 2, 4));
  for (int i = 0; i < 3; ++i) h.Join("w" + std::to_string(i));
  EpochPlan three = h.Settle();
  h.Updates();
  h.Join("w3");
  EpochPlan p = Phase(h.Updates(), PlanPhase::kProposed).at(0).plan;
  for (const Session& s : h.Participants(p)) {
    ASSERT_TRUE(h.m_->AckPrepared(s.id, s.token, p.epoch, 7, true).ok());
  }
  ASSERT_EQ(h.m_->CommittedEpoch(), p.epoch);
  h.Updates();
  h.Kill("w3");  // the newcomer dies during the moves
  EXPECT_EQ(h.Beat("w0").command, Command::kAbort);
  std::vector<PlanUpdate> next = Phase(h.Updates(), PlanPhase::kProposed);
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0].plan.base_epoch, three.epoch);
  EXPECT_EQ(next[0].plan.world, 3);
  // The survivors keep their stable ranks: nothing moves.
  EXPECT_TRUE(next[0].plan.moves.empty());
  h.proposed_ = next[0].plan;
  EpochPlan after = h.Settle(7);
  EXPECT_EQ(after.epoch, next[0].plan.epoch);
  std::vector<ReshardRecord> history = h.m_->ReshardHistory(0);
  ASSERT_GE(history.size(), 2u);
  EXPECT_EQ(history[history.size() - 2].epoch, p.epoch);
  EXPECT_EQ(history[history.size() - 2].outcome, "broken");
  EXPECT_EQ(history.back().outcome, "stable");
}

TEST(ReshardTest, LeaveHandsOverThenLeaves) {
  Harness h(testing::TestJob(1, 2, 4));
  for (int i = 0; i < 3; ++i) h.Join("w" + std::to_string(i));
  EpochPlan three = h.Settle();
  h.Updates();
  Session w2 = h.sessions_.at("w2");
  auto handover = h.m_->Leave(w2.id, w2.token, "sigterm");
  ASSERT_TRUE(handover.ok());
  EXPECT_TRUE(*handover);
  EXPECT_EQ(h.StateOf("w2"), MemberState::kDraining);
  EXPECT_EQ(h.Beat("w0").command, Command::kNone);  // no abort: w2 is alive
  EpochPlan p = Phase(h.Updates(), PlanPhase::kProposed).at(0).plan;
  EXPECT_EQ(p.world, 2);
  EXPECT_EQ(RankIn(p, w2.id), -1);
  int64_t from_w2 = 0;
  for (const plan::Move& m : p.moves) from_w2 += m.source_member == w2.id;
  EXPECT_GT(from_w2, 0);
  EXPECT_EQ(p.summary.bytes_moved, p.summary.lower_bound_bytes);
  // The sender must ack PREPARED before the commit.
  for (int r = 0; r < p.world; ++r) {
    Session s = h.SessionOf(p.slots[r].worker_id);
    EXPECT_EQ(*h.m_->AckPrepared(s.id, s.token, p.epoch, 3, true),
              PlanPhase::kProposed);
  }
  EXPECT_EQ(h.Beat("w2").command, Command::kNone);  // still holds state
  EXPECT_EQ(*h.m_->AckPrepared(w2.id, w2.token, p.epoch, 3, true),
            PlanPhase::kCommitted);
  EXPECT_EQ(h.Beat("w2").command, Command::kNone);  // not stable yet
  for (int r = 0; r < p.world; ++r) {
    Session s = h.SessionOf(p.slots[r].worker_id);
    ASSERT_TRUE(h.m_->AckActive(s.id, s.token, p.epoch).ok());
  }
  EXPECT_EQ(h.Beat("w2").command, Command::kDrain);
  auto second = h.m_->Leave(w2.id, w2.token, "done");
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(*second);
  EXPECT_EQ(h.StateOf("w2"), MemberState::kLeft);
  EXPECT_EQ(h.m_->CommittedEpoch(), p.epoch);  // no further transition
  (void)three;
}

TEST(ReshardTest, CommitPendingResolvedThroughTheMembership) {
  Harness h;  // I = 2
  for (int i = 0; i < 5; ++i) h.Join("w" + std::to_string(i));
  h.Settle(10);
  h.Updates();
  h.Kill(h.NameAtRank(3));
  EpochPlan p = Phase(h.Updates(), PlanPhase::kProposed).at(0).plan;
  std::vector<Session> parts = h.Participants(p);
  ASSERT_EQ(parts.size(), 4u);
  PreparedAck passed;
  passed.step = 12;
  passed.adam_step = 11;
  passed.commit_values = {0.0, 4.5};
  PreparedAck pending;
  pending.step = 11;
  pending.adam_step = 10;
  pending.commit_pending = true;
  for (size_t i = 0; i < parts.size(); ++i) {
    const Session& s = parts[i];
    bool holder = RankIn(h.m_->StablePlan(), s.id) >= 0;
    PreparedAck a = holder && i == 1 ? pending : passed;
    if (!holder) a = PreparedAck();  // the spare holds nothing
    ASSERT_TRUE(h.m_->AckPrepared(s.id, s.token, p.epoch, a).ok());
  }
  std::vector<PlanUpdate> c = Phase(h.Updates(), PlanPhase::kCommitted);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].plan.resume_step, 12);
  EXPECT_EQ(c[0].plan.resume_adam_step, 11);
  EXPECT_TRUE(c[0].plan.finish_pending_step);
  EXPECT_THAT(c[0].plan.commit_values, ::testing::ElementsAre(0.0, 4.5));
}

TEST(ReshardTest, UnresolvableStepsFailTheJobWithoutCheckpoint) {
  Harness h;  // I = 2
  for (int i = 0; i < 5; ++i) h.Join("w" + std::to_string(i));
  h.Settle(10);
  h.Updates();
  h.Kill(h.NameAtRank(3));
  EpochPlan p = Phase(h.Updates(), PlanPhase::kProposed).at(0).plan;
  int i = 0;
  for (const Session& s : h.Participants(p)) {
    ASSERT_TRUE(
        h.m_->AckPrepared(s.id, s.token, p.epoch, 10 + 3 * (i++ % 2), true)
            .ok());
  }
  EXPECT_NE(h.m_->CommittedEpoch(), p.epoch);
  std::vector<PlanUpdate> u = h.Updates();
  EXPECT_EQ(Phase(u, PlanPhase::kAbandoned).size(), 1u);
  EXPECT_TRUE(Phase(u, PlanPhase::kCommitted).empty());
  HeartbeatReply r = h.Beat("w0");
  EXPECT_EQ(r.command, Command::kExit);
  EXPECT_TRUE(r.job_failed);
  EXPECT_THAT(r.exit_reason, HasSubstr("no checkpoint"));
}

TEST(ReshardTest, DrainedMemberThatDiesBeforeHandingOverIsAFailure) {
  Harness h(testing::TestJob(1, 2, 4));
  for (int i = 0; i < 3; ++i) h.Join("w" + std::to_string(i));
  h.Settle();
  h.Updates();
  ASSERT_TRUE(h.m_->Drain("w2").ok());
  EpochPlan p = Phase(h.Updates(), PlanPhase::kProposed).at(0).plan;
  EXPECT_EQ(p.world, 2);
  EXPECT_EQ(h.Beat("w2").command, Command::kNone);  // it must send first
  h.Kill("w2");
  std::vector<PlanUpdate> u = h.Updates();
  EXPECT_EQ(Phase(u, PlanPhase::kAbandoned).size(), 1u);
  // I = 1: its ranges had no replica and there is no checkpoint.
  EXPECT_TRUE(Phase(u, PlanPhase::kProposed).empty());
  EXPECT_EQ(EventsOf(*h.m_, "lost").size(), 1u);
  EXPECT_TRUE(h.Beat("w0").job_failed);
}

TEST(ReshardTest, LostRangeWithoutCheckpointFailsTheJob) {
  Harness h(testing::TestJob(1, 2, 4));
  for (int i = 0; i < 3; ++i) h.Join("w" + std::to_string(i));
  h.Settle();
  h.Updates();
  h.Kill(h.NameAtRank(1));
  EXPECT_TRUE(Phase(h.Updates(), PlanPhase::kProposed).empty());
  std::vector<Event> lost = EventsOf(*h.m_, "lost");
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_THAT(lost[0].reason, HasSubstr("param '"));
  EXPECT_THAT(lost[0].reason, HasSubstr("no checkpoint"));
  HeartbeatReply r = h.Beat("w0");
  EXPECT_EQ(r.command, Command::kExit);
  EXPECT_TRUE(r.job_failed);
  EXPECT_EQ(r.exit_reason, lost[0].reason);
  EXPECT_EQ(h.m_->FailureReason(), lost[0].reason);
  // Later joins propose nothing.
  h.Join("w9");
  EXPECT_TRUE(h.Updates().empty());
}

}  // namespace
}  // namespace zshard::server
