// A change is shown (plan updates, heartbeat facts, events) only once its
// store write is durable: a leader whose commit never reached the store
// has told no worker of it, so its successor, reading the store, never
// contradicts what workers saw (docs/design.md section 11).
#include <string>

#include "gtest/gtest.h"
#include "server/store/memory_state_store.h"
#include "tests/server/membership/membership_harness.h"

namespace zshard::server {
namespace {

using testing::Harness;

// The in-memory store, with writes that fail while `failing` (etcd away,
// or this leader deposed: its guarded transactions are refused).
class FlakyStore final : public StateStore {
 public:
  absl::StatusOr<StoredState> Load() override { return store_.Load(); }
  absl::Status SaveJob(const std::string& name,
                       const std::string& spec) override {
    return store_.SaveJob(name, spec);
  }
  absl::Status Apply(const StoreWrite& write) override {
    if (failing) return absl::FailedPreconditionError("not the leader");
    return store_.Apply(write);
  }
  absl::StatusOr<std::vector<Event>> RecentEvents(int limit) override {
    return store_.RecentEvents(limit);
  }
  absl::Status PutRendezvous(int64_t epoch, const std::string& key,
                             const std::string& value) override {
    return store_.PutRendezvous(epoch, key, value);
  }
  absl::StatusOr<RendezvousEntries> LoadRendezvous() override {
    return store_.LoadRendezvous();
  }
  absl::Status DropRendezvousBefore(int64_t epoch) override {
    return store_.DropRendezvousBefore(epoch);
  }
  bool failing = false;

 private:
  MemoryStateStore store_;
};

bool HasPhase(const std::vector<PlanUpdate>& updates, PlanPhase phase) {
  for (const PlanUpdate& u : updates) {
    if (u.phase == phase) return true;
  }
  return false;
}

bool HasEvent(Membership& m, const std::string& kind) {
  for (const Event& e : m.events()->After(0, 1000).events) {
    if (e.kind == kind) return true;
  }
  return false;
}

// Proposes epoch 1 (durable and shown), then commits it with the store
// refusing writes.
void CommitWhileTheStoreRefuses(Harness& h, FlakyStore& store) {
  h.Join("a");
  h.Join("b");
  h.m_->Tick();
  EpochPlan proposed;
  for (const PlanUpdate& u : h.Updates()) {
    if (u.phase == PlanPhase::kProposed) proposed = u.plan;
  }
  ASSERT_EQ(proposed.epoch, 1);
  store.failing = true;
  for (const testing::Session& s : h.Participants(proposed)) {
    ASSERT_TRUE(h.m_->AckPrepared(s.id, s.token, 1, 0, true).ok());
  }
  ASSERT_EQ(h.m_->CommittedPlan().epoch, 1);  // in memory only
}

TEST(DurablePublishTest, ACommitIsShownOnlyOnceItsWriteIsDurable) {
  FlakyStore store;
  Harness h(testing::TestJob(), &store);
  CommitWhileTheStoreRefuses(h, store);
  h.m_->Tick();  // tries again: still refused
  EXPECT_FALSE(HasPhase(h.Updates(), PlanPhase::kCommitted));
  EXPECT_EQ(h.Beat("a").epoch, 0);
  EXPECT_EQ(h.Beat("a").pending_epoch, 1);
  EXPECT_FALSE(HasEvent(*h.m_, "commit"));
  EXPECT_GE(h.m_->Stats().store_failures, 2);
  // The store is back: the next tick writes the commit, then shows it.
  store.failing = false;
  h.m_->Tick();
  EXPECT_TRUE(HasPhase(h.Updates(), PlanPhase::kCommitted));
  EXPECT_EQ(h.Beat("a").epoch, 1);
  EXPECT_TRUE(HasEvent(*h.m_, "commit"));
  // And a successor reads it from the store.
  Harness next(testing::TestJob(), &store);
  EXPECT_EQ(next.m_->CommittedPlan().epoch, 1);
}

TEST(DurablePublishTest, ASuccessorNeverContradictsWhatWorkersSaw) {
  FlakyStore store;
  Harness h(testing::TestJob(), &store);
  CommitWhileTheStoreRefuses(h, store);
  // The leader is gone before its commit was durable; workers saw only the
  // proposal, which the successor abandons, never reusing its epoch.
  EXPECT_FALSE(HasPhase(h.Updates(), PlanPhase::kCommitted));
  store.failing = false;
  Harness next(testing::TestJob(), &store);
  EXPECT_EQ(next.m_->CommittedPlan().epoch, 0);
  EXPECT_TRUE(HasEvent(*next.m_, "abandon"));
  // It proposes the restored members again, under a new epoch.
  std::vector<PlanUpdate> seen = next.Updates();
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.back().phase, PlanPhase::kProposed);
  EXPECT_FALSE(HasPhase(seen, PlanPhase::kCommitted));
  EpochPlan proposed = seen.back().plan;
  EXPECT_EQ(proposed.epoch, 2);
}

}  // namespace
}  // namespace zshard::server
