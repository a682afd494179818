// MemberTable: joins, sessions, leases, suspects and forgetting.
#include "server/membership/members/member_table.h"

#include <string>

#include "gtest/gtest.h"

namespace zshard::server {
namespace {

LeasePolicy Policy() {
  LeasePolicy p;
  p.lease_timeout_ms = 1000;
  p.suspect_window_ms = 400;
  p.suspect_grace_ms = 300;
  return p;
}

JoinArgs Args(const std::string& name) {
  JoinArgs a;
  a.name = name;
  return a;
}

TEST(MemberTableTest, JoinArgsAreChecked) {
  EXPECT_TRUE(MemberTable::CheckJoinArgs(Args("w1")).ok());
  EXPECT_EQ(MemberTable::CheckJoinArgs(Args("")).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MemberTable::CheckJoinArgs(Args("a b")).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MemberTable::ClipReason(std::string(5000, 'x')).size(), 1024u);
}

TEST(MemberTableTest, SessionsNeedTheTokenOfALiveIncarnation) {
  MemberTable t(Policy());
  Member& m = t.Add(Args("w1"), 0);
  EXPECT_EQ(m.state, MemberState::kJoining);
  EXPECT_EQ(m.join_seq, 1);
  EXPECT_TRUE(t.Session(m.worker_id, m.token).ok());
  EXPECT_EQ(t.Session(m.worker_id, "bad").status().code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(t.Session("w-none", m.token).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(t.Session("", m.token).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(t.FindLive("w1"), &m);
  EXPECT_TRUE(t.MarkGone(m, MemberState::kLeft, "bye"));
  EXPECT_FALSE(t.MarkGone(m, MemberState::kDead, "again"));
  EXPECT_EQ(m.state, MemberState::kLeft);
  EXPECT_EQ(t.FindLive("w1"), nullptr);
  EXPECT_EQ(t.live_count(), 0u);
  EXPECT_EQ(t.Session(m.worker_id, m.token).status().code(),
            absl::StatusCode::kUnauthenticated);
}

TEST(MemberTableTest, LeasesAndSuspectsExpire) {
  MemberTable t(Policy());
  Member& a = t.Add(Args("a"), 0);
  Member& b = t.Add(Args("b"), 0);
  t.Heartbeat(a, 0, 3, 900);
  EXPECT_EQ(a.step, 3);
  std::vector<Expiry> e = t.Expired(1001);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].worker_id, b.worker_id);
  EXPECT_EQ(e[0].change, "member b's lease expired");
  EXPECT_FALSE(t.SilentTooLong(a, 1200));
  EXPECT_TRUE(t.SilentTooLong(a, 1301));
  EXPECT_TRUE(t.MarkSuspect(a, 1000));
  EXPECT_FALSE(t.MarkSuspect(a, 1100));
  t.Heartbeat(b, 0, 0, 1000);
  EXPECT_TRUE(t.Expired(1300).empty());
  e = t.Expired(1301);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].worker_id, a.worker_id);
  EXPECT_EQ(e[0].reason, "suspect confirmed: no heartbeat after the report");
  t.Heartbeat(a, 0, 3, 1301);  // a heartbeat ends the suspect check
  EXPECT_TRUE(t.Expired(1302).empty());
}

TEST(MemberTableTest, ForgetDropsTheOldestUnpinnedGone) {
  MemberTable t(Policy());
  std::vector<std::string> ids;
  for (const char* n : {"a", "b", "c", "d"}) {
    Member& m = t.Add(Args(n), 0);
    ids.push_back(m.worker_id);
    t.MarkGone(m, MemberState::kDead, "x");
  }
  auto pinned = [&](const std::string& id) { return id == ids[0]; };
  EXPECT_TRUE(t.Forget(3, pinned).empty());
  std::vector<std::string> dropped = t.Forget(1, pinned);
  EXPECT_EQ(dropped, (std::vector<std::string>{ids[1], ids[2]}));
  EXPECT_NE(t.Find(ids[0]), nullptr);
  EXPECT_EQ(t.Find(ids[1]), nullptr);
}

TEST(MemberTableTest, PlaceRanksMembersOfANewEpoch) {
  MemberTable t(Policy());
  Member& a = t.Add(Args("a"), 0);
  Member& b = t.Add(Args("b"), 0);
  Member& c = t.Add(Args("c"), 0);
  Member& d = t.Add(Args("d"), 0);
  t.MarkDraining(d, "leaving");
  EXPECT_EQ(t.JoiningToSpare().size(), 3u);
  EXPECT_TRUE(t.JoiningToSpare().empty());
  auto rank_of = [&](const std::string& id) {
    return id == a.worker_id ? 0 : id == b.worker_id ? 1 : -1;
  };
  EXPECT_EQ(t.Place(rank_of).size(), 2u);
  EXPECT_EQ(a.state, MemberState::kActive);
  EXPECT_EQ(b.rank, 1);
  EXPECT_EQ(c.state, MemberState::kSpare);
  EXPECT_EQ(d.state, MemberState::kDraining);
  EXPECT_TRUE(t.Place(rank_of).empty());
  auto none = [](const std::string&) { return -1; };
  EXPECT_EQ(t.Place(none).size(), 2u);
  EXPECT_EQ(a.state, MemberState::kSpare);
  EXPECT_EQ(a.rank, -1);
  t.RaiseStep(a, 5);
  t.RaiseStep(a, 3);
  EXPECT_EQ(a.step, 5);
}

TEST(MemberTableTest, RestoreReArmsLeasesAndJoinOrder) {
  MemberTable t(Policy());
  Member stored;
  stored.worker_id = "w-1";
  stored.name = "a";
  stored.join_seq = 7;
  stored.state = MemberState::kActive;
  stored.step = 9;
  t.Restore({stored}, 500);
  const Member* m = t.Find("w-1");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->lease->last_heartbeat_ms.load(), 500);
  EXPECT_EQ(m->lease->suspect_since_ms.load(), -1);
  EXPECT_EQ(m->lease->state.load(), MemberState::kActive);
  EXPECT_EQ(MemberTable::StepOf(*m), 9);
  EXPECT_EQ(t.SilenceMs(*m, 500), 0);
  EXPECT_EQ(t.next_join_seq(), 8);
  EXPECT_EQ(t.live_count(), 1u);
}

TEST(MemberTableTest, LeasesAreRenewedWithoutTheTableAndMirrorItsStates) {
  MemberTable t(Policy());
  Member& a = t.Add(Args("a"), 0);
  Member& b = t.Add(Args("b"), 0);
  // The heartbeat path: the lease book alone, as a heartbeat uses it.
  auto lease = t.leases()->Session(a.worker_id, a.token);
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ(t.leases()->Session(a.worker_id, b.token).status().code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(t.leases()->Session("w-none", a.token).status().code(),
            absl::StatusCode::kNotFound);
  (*lease)->Renew(0, 4, 900);
  EXPECT_EQ(t.SilenceMs(a, 1000), 100);
  EXPECT_EQ(MemberTable::Copy(a).step, 4);
  ASSERT_EQ(t.Expired(1001).size(), 1u);  // b only
  // State and rank changes reach the lease.
  t.Place([&](const std::string& id) { return id == a.worker_id ? 0 : -1; });
  EXPECT_EQ((*lease)->state.load(), MemberState::kActive);
  EXPECT_EQ((*lease)->rank.load(), 0);
  t.MarkDraining(a, "bye");
  EXPECT_EQ(t.draining().count(a.worker_id), 1u);
  EXPECT_TRUE(t.MarkGone(a, MemberState::kLeft, "bye"));
  EXPECT_EQ((*lease)->state.load(), MemberState::kLeft);
  EXPECT_TRUE(t.draining().empty());
  // A pause: every live member gets one lease from now; the gone keep theirs.
  t.RearmLeases(5000);
  EXPECT_EQ(t.SilenceMs(b, 5000), 0);
  EXPECT_EQ(t.SilenceMs(a, 5000), 4100);
  EXPECT_TRUE(t.Expired(6000).empty());
  EXPECT_EQ(t.Expired(6001).size(), 1u);
}

}  // namespace
}  // namespace zshard::server
