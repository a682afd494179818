// The membership state machine with a fake clock: joins, spares, leases,
// suspects, transitions with failures in each phase, fencing, drain.
#include "server/membership/membership.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/membership/membership_harness.h"

namespace zshard::server {
namespace {

using testing::Harness;
using testing::Session;

TEST(MembershipTest, NoEpochUntilMinWorldJoins) {
  Harness h;
  h.Join("w0");
  EXPECT_TRUE(h.Updates().empty());
  EXPECT_EQ(h.StateOf("w0"), MemberState::kJoining);
  h.Join("w1");
  std::vector<PlanUpdate> u = h.Updates();
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(u[0].phase, PlanPhase::kProposed);
  EXPECT_EQ(u[0].plan.epoch, 1);
  EXPECT_EQ(u[0].plan.world, 2);
  EXPECT_FALSE(u[0].plan.plan_hash.empty());
}

TEST(MembershipTest, TwoPhaseCommitWithResumeStep) {
  Harness h;
  Session a = h.Join("w0");
  Session b = h.Join("w1");
  h.Updates();
  EXPECT_EQ(*h.m_->AckPrepared(a.id, a.token, 1, 7, true),
            PlanPhase::kProposed);
  EXPECT_TRUE(h.m_->View().transitioning);
  EXPECT_EQ(*h.m_->AckPrepared(b.id, b.token, 1, 9, false),
            PlanPhase::kCommitted);
  std::vector<PlanUpdate> u = h.Updates();
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(u[0].phase, PlanPhase::kCommitted);
  EXPECT_EQ(u[0].plan.resume_step, 9);
  EXPECT_EQ(h.StateOf("w0"), MemberState::kActive);
  ASSERT_TRUE(h.m_->AckActive(a.id, a.token, 1).ok());
  EXPECT_TRUE(h.m_->View().transitioning);
  ASSERT_TRUE(h.m_->AckActive(b.id, b.token, 1).ok());
  ClusterView v = h.m_->View();
  EXPECT_FALSE(v.transitioning);
  EXPECT_EQ(v.epoch, 1);
  EXPECT_EQ(v.world, 2);
}

TEST(MembershipTest, FiveWorkersGiveWorldFourAndOneSpare) {
  job::JobSpec spec = testing::TestJob();
  spec.transition_settle_ms = 200;
  Harness h(spec);
  for (int i = 0; i < 5; ++i) h.Join("w" + std::to_string(i));
  h.clock_.AdvanceMs(200);
  h.m_->Tick();
  EpochPlan p = h.Settle();
  // The five joins settled into one proposal: world 4 and the spare.
  EXPECT_EQ(p.epoch, 1);
  EXPECT_EQ(p.world, 4);
  EXPECT_EQ(p.instances, 2);
  ASSERT_EQ(p.slots.size(), 5u);
  EXPECT_EQ(p.slots[4].rank, -1);
  EXPECT_EQ(p.slots[3].instance, 1);
  EXPECT_EQ(p.slots[3].shard_rank, 1);
  EXPECT_EQ(h.NameAtRank(0), "w0");
  EXPECT_EQ(h.NameAtRank(1), "w1");
  EXPECT_EQ(h.StateOf("w4"), MemberState::kSpare);
}

TEST(MembershipTest, PlanUpdatesListOnlyTheFirstSpares) {
  job::JobSpec spec = testing::TestJob();
  spec.transition_settle_ms = 200;
  Harness h(spec);
  for (int i = 0; i < 14; ++i) h.Join("w" + std::to_string(i));
  h.clock_.AdvanceMs(200);
  h.m_->Tick();
  EpochPlan p = h.Settle();
  EXPECT_EQ(p.world, 4);
  EXPECT_EQ(p.spares, 10);
  ASSERT_EQ(p.slots.size(), 4u + 8u);  // max_listed_spares = 8
  EXPECT_EQ(p.slots[4].rank, -1);
  EXPECT_EQ(h.StateOf("w13"), MemberState::kSpare);  // unlisted, still spare
}

TEST(MembershipTest, LeaseExpiryPutsTheSpareIntoTheDeadRank) {
  Harness h;
  for (int i = 0; i < 5; ++i) h.Join("w" + std::to_string(i));
  EpochPlan before = h.Settle();
  std::string victim = h.NameAtRank(2);
  h.clock_.AdvanceMs(3000);
  h.BeatAll(victim);
  h.clock_.AdvanceMs(3000);  // victim silent 6 s > lease 5 s
  h.BeatAll(victim);
  h.m_->Tick();
  EXPECT_EQ(h.StateOf(victim), MemberState::kDead);
  // Survivors of the broken epoch are told to abort.
  EXPECT_EQ(h.Beat(h.NameAtRank(0)).command, Command::kAbort);
  EpochPlan after = h.Settle();
  EXPECT_GT(after.epoch, before.epoch);
  EXPECT_EQ(after.world, 4);
  EXPECT_EQ(h.NameAtRank(2), "w4");  // the spare
  for (int r : {0, 1, 3}) {
    EXPECT_EQ(after.slots[r].worker_id, before.slots[r].worker_id);
  }
  EXPECT_EQ(h.Beat("w0").command, Command::kNone);
}

TEST(MembershipTest, ThreeHealthyWithTwoInstancesRunsWorldTwo) {
  Harness h;
  for (int i = 0; i < 3; ++i) h.Join("w" + std::to_string(i));
  EpochPlan p = h.Settle();
  EXPECT_EQ(p.world, 2);
  EXPECT_EQ(h.StateOf("w2"), MemberState::kSpare);
}

TEST(MembershipTest, WorldShrinksWhenTooFewSurviveAndWaitsBelowMin) {
  job::JobSpec spec = testing::TestJob(1, 2, 4);
  // Two of the three live members fall silent at once below (w1, and w2
  // still draining): silence alone judges them here, as with isolation
  // off (IsolationTest covers the rule).
  spec.isolation_fraction = 1;
  Harness h(spec);
  for (int i = 0; i < 3; ++i) h.Join("w" + std::to_string(i));
  EXPECT_EQ(h.Settle().world, 3);
  Session s = h.sessions_.at("w2");
  ASSERT_TRUE(h.m_->Leave(s.id, s.token, "bye").ok());
  EpochPlan two = h.Settle();
  EXPECT_EQ(two.world, 2);
  // w1 holds state of the stable epoch: it hands over, but one healthy
  // member is below min 2, so there is no proposal and it keeps its rank.
  s = h.sessions_.at("w1");
  auto handover = h.m_->Leave(s.id, s.token, "bye");
  ASSERT_TRUE(handover.ok());
  EXPECT_TRUE(*handover);
  EXPECT_EQ(h.StateOf("w1"), MemberState::kDraining);
  std::vector<PlanUpdate> u = h.Updates();
  EXPECT_TRUE(u.empty());  // one healthy member < min 2: no proposal
  EXPECT_EQ(h.m_->View().epoch, two.epoch);
  EXPECT_EQ(h.Beat("w0").command, Command::kNone);  // w1 is still there
  h.clock_.AdvanceMs(6000);
  h.Beat("w0");
  h.m_->Tick();  // w1 dies: the survivor aborts
  EXPECT_EQ(h.Beat("w0").command, Command::kAbort);
}

TEST(MembershipTest, FailureWhileProposedAbandonsAndReproposes) {
  Harness h;
  for (int i = 0; i < 3; ++i) h.Join("w" + std::to_string(i));
  h.Settle();                 // world 2, w2 spare
  Session w3 = h.Join("w3");  // world grows to 4: epoch proposed
  std::vector<PlanUpdate> u = h.Updates();
  ASSERT_EQ(u.size(), 1u);
  int64_t proposed = u[0].plan.epoch;
  EXPECT_EQ(u[0].plan.world, 4);
  Session w0 = h.sessions_.at("w0");
  ASSERT_TRUE(h.m_->AckPrepared(w0.id, w0.token, proposed, 3, true).ok());
  ASSERT_TRUE(h.m_->Leave(w3.id, w3.token, "gone").ok());
  u = h.Updates();
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(u[0].phase, PlanPhase::kAbandoned);
  EXPECT_EQ(u[0].plan.epoch, proposed);
  EXPECT_EQ(h.m_->View().epoch, 1);  // the committed epoch stays
  // A stale ack for the abandoned epoch is refused.
  auto stale = h.m_->AckPrepared(w0.id, w0.token, proposed, 3, true);
  EXPECT_EQ(stale.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(h.m_->Stats().abandons, 1);
}

// The protocol changed: the base of a proposal is the last STABLE epoch
// (here none yet), not a committed epoch that broke before it was stable.
TEST(MembershipTest, FailureAfterCommitProposesFromTheStableEpoch) {
  Harness h;
  for (int i = 0; i < 3; ++i) h.Join("w" + std::to_string(i));
  std::vector<PlanUpdate> u = h.Updates();
  ASSERT_EQ(u.size(), 1u);
  EpochPlan p = u[0].plan;
  for (int r = 0; r < p.world; ++r) {
    Session s = h.SessionOf(p.slots[r].worker_id);
    ASSERT_TRUE(h.m_->AckPrepared(s.id, s.token, p.epoch, 0, true).ok());
  }
  // Committed, not yet active: rank 1 dies.
  Session s1 = h.SessionOf(p.slots[1].worker_id);
  ASSERT_TRUE(h.m_->Leave(s1.id, s1.token, "crash").ok());
  u = h.Updates();
  ASSERT_EQ(u.size(), 2u);
  EXPECT_EQ(u[0].phase, PlanPhase::kCommitted);
  EXPECT_EQ(u[1].phase, PlanPhase::kProposed);
  EXPECT_EQ(u[1].plan.base_epoch, 0);
  EXPECT_EQ(u[1].plan.slots[1].name, "w2");
  EXPECT_EQ(u[1].plan.slots[0].worker_id, p.slots[0].worker_id);
}

TEST(MembershipTest, SilentSuspectIsDeadAtOnce) {
  // keep_i: world 2 of 3 members is two replicas (D=1), so w1's ranges
  // survive its death and w2 takes its rank.
  job::JobSpec spec = testing::TestJob();
  spec.world.resize = job::ResizePolicy::kKeepI;
  Harness h(spec);
  for (int i = 0; i < 3; ++i) h.Join("w" + std::to_string(i));
  h.Settle();
  h.clock_.AdvanceMs(2500);  // > suspect window (2 heartbeats), < lease
  h.BeatAll("w1");
  Session w0 = h.sessions_.at("w0");
  auto state = h.m_->ReportSuspect(w0.id, w0.token, 1, h.sessions_.at("w1").id,
                                   -1, "timeout");
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(*state, MemberState::kDead);
  EXPECT_EQ(h.Settle().slots[1].name, "w2");
}

TEST(MembershipTest, SuspectIsDeadUnlessItHeartbeatsWithinGrace) {
  Harness h;
  for (int i = 0; i < 4; ++i) h.Join("w" + std::to_string(i));
  EpochPlan p = h.Settle();
  ASSERT_EQ(p.world, 4);
  Session w0 = h.sessions_.at("w0");
  // By rank; w1 heartbeated recently, so it is only suspected.
  auto state = h.m_->ReportSuspect(w0.id, w0.token, p.epoch, "", 1, "x");
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(*state, MemberState::kActive);
  h.Beat("w1");  // clears the suspicion
  h.clock_.AdvanceMs(1600);
  h.m_->Tick();
  EXPECT_EQ(h.StateOf("w1"), MemberState::kActive);
  ASSERT_TRUE(h.m_->ReportSuspect(w0.id, w0.token, p.epoch, "", 2, "x").ok());
  h.clock_.AdvanceMs(1600);  // within the grace of 3 heartbeats
  h.BeatAll("w2");
  h.m_->Tick();
  EXPECT_EQ(h.StateOf("w2"), MemberState::kActive);
  h.clock_.AdvanceMs(1500);  // > grace of 3 heartbeats, no heartbeat
  h.BeatAll("w2");
  h.m_->Tick();
  EXPECT_EQ(h.StateOf("w2"), MemberState::kDead);
  auto self = h.m_->ReportSuspect(w0.id, w0.token, p.epoch, w0.id, -1, "x");
  EXPECT_EQ(self.status().code(), absl::StatusCode::kInvalidArgument);
  auto bad_rank = h.m_->ReportSuspect(w0.id, w0.token, p.epoch, "", 9, "x");
  EXPECT_EQ(bad_rank.status().code(), absl::StatusCode::kInvalidArgument);
  auto unknown = h.m_->ReportSuspect(w0.id, w0.token, p.epoch, "w-x", -1, "");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
}

TEST(MembershipTest, TokensAndEpochsAreFenced) {
  Harness h;
  Session old = h.Join("w0");
  h.Join("w1");
  h.Settle();
  EXPECT_EQ(h.m_->Heartbeat("w-nope", old.token, 0, 0).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(h.m_->Heartbeat(old.id, "forged", 0, 0).status().code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(h.m_->Heartbeat(old.id, "", 0, 0).status().code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(h.m_->Heartbeat("", old.token, 0, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(h.m_->Heartbeat(old.id, old.token, 99, 0).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(h.m_->Heartbeat(old.id, old.token, -1, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  Session fresh = h.Join("w0");  // a restarted pod
  EXPECT_NE(fresh.id, old.id);
  EXPECT_NE(fresh.token, old.token);
  absl::Status fenced = h.m_->Heartbeat(old.id, old.token, 1, 0).status();
  EXPECT_EQ(fenced.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(std::string(fenced.message()), ::testing::HasSubstr("fenced"));
  EXPECT_TRUE(h.m_->Heartbeat(fresh.id, fresh.token, 1, 0).ok());
  EXPECT_TRUE(h.m_->CheckEpoch(1).ok());
  EXPECT_EQ(h.m_->CheckEpoch(0).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(h.m_->AckActive(fresh.id, fresh.token, 7).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(MembershipTest, BadJoinsAreRefused) {
  Harness h;
  JoinArgs a;
  EXPECT_EQ(h.m_->Join(a).status().code(), absl::StatusCode::kInvalidArgument);
  a.name = std::string(257, 'x');
  EXPECT_EQ(h.m_->Join(a).status().code(), absl::StatusCode::kInvalidArgument);
  a.name = "has space";
  EXPECT_EQ(h.m_->Join(a).status().code(), absl::StatusCode::kInvalidArgument);
  a.name = "ok";
  a.labels[""] = "x";
  EXPECT_EQ(h.m_->Join(a).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(MembershipTest, JoinFloodIsBounded) {
  FakeClock clock;
  MembershipOptions options;
  options.max_live_members = 3;
  auto m = Membership::Create(testing::TestJob(), &clock, nullptr, options);
  ASSERT_TRUE(m.ok());
  JoinArgs a;
  for (int i = 0; i < 3; ++i) {
    a.name = "w" + std::to_string(i);
    ASSERT_TRUE((*m)->Join(a).ok());
  }
  a.name = "w9";
  EXPECT_EQ((*m)->Join(a).status().code(),
            absl::StatusCode::kResourceExhausted);
  a.name = "w0";  // a new incarnation replaces, so it fits
  EXPECT_TRUE((*m)->Join(a).ok());
}

TEST(MembershipTest, OldestGoneRecordsAreForgotten) {
  FakeClock clock;
  MembershipOptions options;
  options.max_gone_members = 2;
  auto m = Membership::Create(testing::TestJob(), &clock, nullptr, options);
  ASSERT_TRUE(m.ok());
  std::vector<JoinReply> joins;
  JoinArgs a;
  a.name = "flapping";
  for (int i = 0; i < 5; ++i) joins.push_back(*(*m)->Join(a));
  // Four fenced incarnations, two remembered: the oldest are unknown now.
  EXPECT_EQ((*m)->CheckSession(joins[0].worker_id, joins[0].token).code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ((*m)->CheckSession(joins[3].worker_id, joins[3].token).code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE((*m)->CheckSession(joins[4].worker_id, joins[4].token).ok());
}

TEST(MembershipTest, DrainRemovesAnActiveRankAndReleasesASpare) {
  Harness h;
  for (int i = 0; i < 5; ++i) h.Join("w" + std::to_string(i));
  h.Settle();
  ASSERT_TRUE(h.m_->Drain("w4").ok());  // the spare
  EXPECT_EQ(h.Beat("w4").command, Command::kDrain);
  ASSERT_TRUE(h.m_->Drain("w1").ok());  // rank 1, no spare left: world 2
  EpochPlan p = h.Settle();
  EXPECT_EQ(p.world, 2);
  EXPECT_EQ(h.Beat("w1").command, Command::kDrain);
  EXPECT_EQ(h.m_->Drain("nobody").code(), absl::StatusCode::kNotFound);
}

TEST(MembershipTest, TargetWorldCapsAndIsValidated) {
  Harness h;
  for (int i = 0; i < 4; ++i) h.Join("w" + std::to_string(i));
  EXPECT_EQ(h.Settle().world, 4);
  EXPECT_EQ(h.m_->SetTargetWorld(3).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(h.m_->SetTargetWorld(6).status().code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(h.m_->SetTargetWorld(2).ok());
  EXPECT_EQ(h.Settle().world, 2);
  ASSERT_TRUE(h.m_->SetTargetWorld(0).ok());
  EXPECT_EQ(h.Settle().world, 4);
}

TEST(MembershipTest, FinishedJobTellsWorkersToExit) {
  Harness h(testing::TestJob(2, 2, 4, /*steps=*/10));
  h.Join("w0");
  h.Join("w1");
  h.Settle();
  EXPECT_EQ(h.Beat("w0", 10).command, Command::kNone);
  EXPECT_EQ(h.Beat("w1", 10).command, Command::kExit);
  EXPECT_EQ(h.Beat("w0", 10).command, Command::kExit);
}

TEST(MembershipTest, WatchSnapshotThenIncrementalUpdates) {
  Harness h;
  h.Join("w0");
  h.Join("w1");
  h.Settle();
  WatchBatch snap = h.m_->WaitForUpdates(-1, absl::ZeroDuration());
  ASSERT_EQ(snap.updates.size(), 1u);
  EXPECT_EQ(snap.updates[0]->phase, PlanPhase::kStable);
  WatchBatch none = h.m_->WaitForUpdates(snap.last_seq, absl::Milliseconds(1));
  EXPECT_TRUE(none.updates.empty());
  h.Join("w2");
  h.Join("w3");
  WatchBatch next = h.m_->WaitForUpdates(snap.last_seq, absl::Seconds(5));
  ASSERT_EQ(next.updates.size(), 1u);
  EXPECT_EQ(next.updates[0]->phase, PlanPhase::kProposed);
  h.m_->Shutdown();
  EXPECT_TRUE(h.m_->WaitForUpdates(next.last_seq, absl::Seconds(5)).shutdown);
}

}  // namespace
}  // namespace zshard::server
