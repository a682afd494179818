// Persistence round trip over every store (real SQLite in a temp dir, a
// real etcd started by the test, memory): a membership is rebuilt from its
// store with the same epoch, members and tokens, and no new epoch; a
// transition cut by the restart is abandoned; rendezvous values survive.
#include <stdlib.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/rendezvous/rendezvous_kv.h"
#include "server/store/sqlite_state_store.h"
#include "tests/server/membership/membership_harness.h"
#include "tests/server/store/store_backends.h"

namespace zshard::server {
namespace {

using ::testing::ElementsAre;
using testing::StoreKind;

class StoreTest : public testing::StoreParamTest {};

TEST_P(StoreTest, RestartRestoresEpochMembersAndTokens) {
  std::map<std::string, testing::Session> sessions;
  EpochPlan before;
  {
    auto store = Open();
    ASSERT_NE(store, nullptr);
    testing::Harness h(testing::TestJob(), store.get());
    for (int i = 0; i < 5; ++i) h.Join("w" + std::to_string(i));
    before = h.Settle(/*step=*/40);
    ASSERT_EQ(before.world, 4);
    sessions = h.sessions_;
  }
  auto store = Open();
  ASSERT_NE(store, nullptr);
  FakeClock clock(50000);
  auto m = Membership::Create(testing::TestJob(), &clock, store.get()).value();
  ClusterView v = m->View();
  EXPECT_EQ(v.epoch, before.epoch);
  EXPECT_EQ(v.world, 4);
  EXPECT_EQ(v.plan_hash, before.plan_hash);
  EXPECT_FALSE(v.transitioning);
  ASSERT_EQ(v.members.size(), 5u);
  EXPECT_EQ(v.members[4].member.state, MemberState::kSpare);
  EpochPlan after = m->CommittedPlan();
  EXPECT_EQ(after.resume_step, 40);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(after.slots[r].worker_id, before.slots[r].worker_id);
  }
  // Old tokens still work; leases were re-armed at restart.
  for (const auto& [name, s] : sessions) {
    auto hb = m->Heartbeat(s.id, s.token, before.epoch, 50);
    EXPECT_TRUE(hb.ok()) << name << ": " << hb.status();
  }
  clock.AdvanceMs(4000);
  m->Tick();
  WatchBatch b = m->WaitForUpdates(-1, absl::ZeroDuration());
  ASSERT_EQ(b.updates.size(), 1u);                     // no spurious new epoch
  EXPECT_EQ(b.updates[0]->phase, PlanPhase::kStable);  // it was stable
  auto events = store->RecentEvents(100);
  ASSERT_TRUE(events.ok());
  EXPECT_GT(events->size(), 5u);
  EXPECT_EQ(events->back().kind, "restart");
}

TEST_P(StoreTest, TransitionCutByRestartIsAbandoned) {
  int64_t proposed = 0;
  {
    auto store = Open();
    ASSERT_NE(store, nullptr);
    testing::Harness h(testing::TestJob(), store.get());
    h.Join("w0");
    h.Join("w1");
    proposed = h.Updates().at(0).plan.epoch;
  }
  auto store = Open();
  ASSERT_NE(store, nullptr);
  FakeClock clock;
  auto m = Membership::Create(testing::TestJob(), &clock, store.get()).value();
  // The cut epoch is abandoned (an event says so); the log holds only the
  // proposal that replaces it, with a fresh epoch number.
  WatchBatch b = m->WaitForUpdates(0, absl::ZeroDuration());
  ASSERT_EQ(b.updates.size(), 1u);
  EXPECT_EQ(b.updates[0]->phase, PlanPhase::kProposed);
  EXPECT_GT(b.updates[0]->plan.epoch, proposed);
  std::vector<std::string> abandons;
  for (const Event& e : m->events()->After(0, 100).events) {
    if (e.kind == "abandon") abandons.push_back(e.reason);
  }
  EXPECT_THAT(abandons,
              ElementsAre(absl::StrCat("epoch ", proposed,
                                       ": coordinator restarted during the "
                                       "transition")));
  EXPECT_EQ(m->View().epoch, 0);
}

TEST_P(StoreTest, AnotherJobInTheStoreIsRefused) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  FakeClock clock;
  ASSERT_TRUE(Membership::Create(testing::TestJob(), &clock, store.get()).ok());
  job::JobSpec other = testing::TestJob();
  other.name = "other";
  auto m = Membership::Create(other, &clock, store.get());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kFailedPrecondition);
}

// The rendezvous values of open transitions: stored one by one, found by
// the next store handle (a new leader), and dropped below an epoch.
TEST_P(StoreTest, RendezvousValuesSurviveARestartUntilDropped) {
  const std::string binary("id\0\xff\x01", 5);
  {
    auto store = Open();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->PutRendezvous(3, "a", "old").ok());
    ASSERT_TRUE(store->PutRendezvous(4, "a", "x").ok());
    ASSERT_TRUE(store->PutRendezvous(4, "a", binary).ok());  // replaces
    ASSERT_TRUE(store->PutRendezvous(4, "b/c", "y").ok());
  }
  auto store = Open();
  ASSERT_NE(store, nullptr);
  auto loaded = store->LoadRendezvous();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(*loaded, (RendezvousEntries{{3, {{"a", "old"}}},
                                        {4, {{"a", binary}, {"b/c", "y"}}}}));
  ASSERT_TRUE(store->DropRendezvousBefore(4).ok());
  loaded = store->LoadRendezvous();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(*loaded, (RendezvousEntries{{4, {{"a", binary}, {"b/c", "y"}}}}));
}

// RendezvousKv over a store: a value set before a failover is read from
// the new leader's RendezvousKv, and epochs it drops leave the store.
TEST_P(StoreTest, RendezvousKvReadsWhatTheLastLeaderSet) {
  {
    auto store = Open();
    ASSERT_NE(store, nullptr);
    auto kv = RendezvousKv::Open({}, store.get());
    ASSERT_TRUE(kv.ok()) << kv.status();
    ASSERT_TRUE((*kv)->Set(7, "uid", "v7").ok());
    ASSERT_TRUE((*kv)->Set(8, "uid", "v8").ok());
  }
  auto store = Open();
  ASSERT_NE(store, nullptr);
  auto kv = RendezvousKv::Open({}, store.get());
  ASSERT_TRUE(kv.ok()) << kv.status();
  auto got = (*kv)->Get(8, "uid", absl::ZeroDuration(), nullptr);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "v8");
  EXPECT_EQ((*kv)->TotalBytes(), 2 * (3 + 2));
  (*kv)->DropBefore(8);
  auto loaded = store->LoadRendezvous();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(*loaded, (RendezvousEntries{{8, {{"uid", "v8"}}}}));
}

INSTANTIATE_TEST_SUITE_P(Stores, StoreTest,
                         ::testing::ValuesIn(testing::kStoreKinds),
                         testing::StoreKindName);

TEST(SqliteStoreTest, UnusableStateDirIsUnavailable) {
  auto store = SqliteStateStore::Open("/proc/zshard-no-such/dir");
  EXPECT_FALSE(store.ok());
}

}  // namespace
}  // namespace zshard::server
