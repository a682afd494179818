// StoreWriter: queued changes are written in order, many in one
// transaction, and a waiter returns once its change is durable.
#include "server/membership/publish/store_writer.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace zshard::server {
namespace {

// Records every Apply.
class RecordingStore : public StateStore {
 public:
  absl::StatusOr<StoredState> Load() override { return StoredState(); }
  absl::Status SaveJob(const std::string&, const std::string&) override {
    return absl::OkStatus();
  }
  absl::Status Apply(const StoreWrite& write) override {
    applied.push_back(write);
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<Event>> RecentEvents(int) override {
    return std::vector<Event>();
  }
  absl::Status PutRendezvous(int64_t, const std::string&,
                             const std::string&) override {
    return absl::OkStatus();
  }
  absl::StatusOr<RendezvousEntries> LoadRendezvous() override {
    return RendezvousEntries();
  }
  absl::Status DropRendezvousBefore(int64_t) override {
    return absl::OkStatus();
  }
  std::vector<StoreWrite> applied;
};

StoreWrite MemberWrite(const std::string& id, int64_t meta) {
  StoreWrite w;
  Member m;
  m.worker_id = id;
  w.members.push_back(m);
  w.meta["next_join_seq"] = meta;
  Event e;
  e.kind = "join";
  e.reason = id;
  w.events.push_back(e);
  return w;
}

TEST(StoreWriterTest, QueuedChangesAreWrittenInOneTransactionInOrder) {
  RecordingStore store;
  StoreWriter writer(&store);
  EXPECT_EQ(writer.Enqueue(StoreWrite()), 0);  // nothing to write
  const int64_t a = writer.Enqueue(MemberWrite("w-a", 2));
  const int64_t b = writer.Enqueue(MemberWrite("w-b", 3));
  const int64_t c = writer.Enqueue(MemberWrite("w-c", 4));
  EXPECT_EQ(a, 1);
  EXPECT_EQ(c, 3);
  writer.WaitApplied(b);
  ASSERT_EQ(store.applied.size(), 1u);
  const StoreWrite& w = store.applied[0];
  ASSERT_EQ(w.members.size(), 3u);
  EXPECT_EQ(w.members[0].worker_id, "w-a");
  EXPECT_EQ(w.members[2].worker_id, "w-c");
  ASSERT_EQ(w.events.size(), 3u);
  EXPECT_EQ(w.events[1].reason, "w-b");
  EXPECT_EQ(w.meta.at("next_join_seq"), 4);  // the latest value wins
  writer.WaitApplied(c);                     // already durable: no second write
  writer.WaitApplied(0);
  EXPECT_EQ(store.applied.size(), 1u);
  writer.WaitApplied(writer.Enqueue(MemberWrite("w-d", 5)));
  EXPECT_EQ(store.applied.size(), 2u);
  // Four changes in two transactions, none failed.
  const StoreWriter::Stats stats = writer.stats();
  EXPECT_EQ(stats.changes, 4);
  EXPECT_EQ(stats.transactions, 2);
  EXPECT_EQ(stats.failures, 0);
  EXPECT_GE(stats.seconds, 0);
}

// A failed transaction is counted, reported to no one as durable, and
// written again, ahead of later changes, by the next write or Retry.
TEST(StoreWriterTest, AFailedTransactionIsKeptAndWrittenAgain) {
  class FlakyStore final : public RecordingStore {
   public:
    absl::Status Apply(const StoreWrite& write) override {
      if (failing) return absl::UnavailableError("etcd 127.0.0.1:1 down");
      return RecordingStore::Apply(write);
    }
    bool failing = true;
  };
  FlakyStore store;
  std::vector<int64_t> durable;
  StoreWriter writer(&store, [&](int64_t t) { durable.push_back(t); });
  writer.WaitApplied(writer.Enqueue(MemberWrite("w-a", 2)));
  writer.WaitApplied(writer.Enqueue(MemberWrite("w-b", 3)));
  writer.Retry();
  EXPECT_TRUE(durable.empty());
  EXPECT_TRUE(store.applied.empty());
  StoreWriter::Stats stats = writer.stats();
  EXPECT_EQ(stats.changes, 2);
  EXPECT_EQ(stats.transactions, 3);
  EXPECT_EQ(stats.failures, 3);
  store.failing = false;
  writer.Retry();
  ASSERT_EQ(store.applied.size(), 1u);
  const StoreWrite& w = store.applied[0];
  ASSERT_EQ(w.members.size(), 2u);
  EXPECT_EQ(w.members[0].worker_id, "w-a");
  EXPECT_EQ(w.members[1].worker_id, "w-b");
  EXPECT_EQ(w.meta.at("next_join_seq"), 3);
  EXPECT_EQ(durable, std::vector<int64_t>({2}));
  writer.Retry();  // nothing left
  EXPECT_EQ(store.applied.size(), 1u);
  writer.WaitApplied(writer.Enqueue(MemberWrite("w-c", 4)));
  EXPECT_EQ(durable, std::vector<int64_t>({2, 3}));
  stats = writer.stats();
  EXPECT_EQ(stats.transactions, 5);
  EXPECT_EQ(stats.failures, 3);
}

TEST(StoreWriterTest, WithoutAStoreNothingIsQueued) {
  StoreWriter writer(nullptr);
  EXPECT_EQ(writer.Enqueue(MemberWrite("w-a", 2)), 0);
  writer.WaitApplied(0);
}

}  // namespace
}  // namespace zshard::server
