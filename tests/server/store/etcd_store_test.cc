// The etcd store against a real etcd started by the test: the gateway
// client (errors naming the endpoint, failover, compares, leases), the
// store's one-transaction batches (same data as SQLite, move chunks, event
// trimming, fencing) and --store parsing.
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/store/etcd_client.h"
#include "server/store/etcd_state_store.h"
#include "server/store/sqlite_state_store.h"
#include "server/store/store_json.h"
#include "server/store/store_spec.h"
#include "tests/server/store/store_backends.h"
#include "tests/testing/etcd_server.h"
#include "tests/testing/free_port.h"
#include "tests/testing/temp_dir.h"

namespace zshard::server {
namespace {

using ::testing::HasSubstr;

class EtcdTest : public testing::EtcdServerTest {
 protected:
  std::unique_ptr<EtcdClient> Client(std::vector<std::string> endpoints) {
    EtcdClientOptions o;
    o.endpoints = std::move(endpoints);
    return EtcdClient::Create(o).value();
  }
  std::unique_ptr<EtcdStateStore> Store(int64_t max_events = 100000,
                                        int64_t moves_per_chunk = 2048) {
    EtcdStateStoreOptions o;
    o.client.endpoints = {endpoint_};
    o.prefix = prefix_;
    o.max_events = max_events;
    o.moves_per_chunk = moves_per_chunk;
    auto store = EtcdStateStore::Open(o);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? *std::move(store) : nullptr;
  }
  static std::string DeadEndpoint() {
    return "127.0.0.1:" + std::to_string(zshard::testing::PickFreePort());
  }
};

TEST_F(EtcdTest, UnreachableEndpointIsNamed) {
  const std::string dead = DeadEndpoint();
  auto r = Client({dead})->RangePrefix("/x");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(r.status().message(),
            "etcd " + dead + " unreachable: connection refused");
}

TEST_F(EtcdTest, FailsOverToTheNextEndpoint) {
  auto client = Client({DeadEndpoint(), endpoint_});
  auto txn = client->Txn({}, {EtcdOp::Put(prefix_ + "/k", "v")});
  ASSERT_TRUE(txn.ok()) << txn.status();
  auto r = client->RangePrefix(prefix_ + "/");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->kvs.size(), 1u);
  EXPECT_EQ(r->kvs[0].value, "v");
}

TEST_F(EtcdTest, TxnComparesOnCreateModAndValue) {
  auto c = Client({endpoint_});
  const std::string key = prefix_ + "/k";
  EtcdCompare absent{key, EtcdCompare::Target::kCreate,
                     EtcdCompare::Result::kEqual, 0, ""};
  auto first = c->Txn({absent}, {EtcdOp::Put(key, "a")});
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->succeeded);
  auto second = c->Txn({absent}, {EtcdOp::Put(key, "b")}, {EtcdOp::Get(key)});
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_FALSE(second->succeeded);
  ASSERT_EQ(second->ranges.size(), 1u);
  ASSERT_EQ(second->ranges[0].kvs.size(), 1u);
  const EtcdKeyValue kv = second->ranges[0].kvs[0];
  EXPECT_EQ(kv.value, "a");
  EXPECT_EQ(kv.create_revision, first->revision);
  EtcdCompare value{key, EtcdCompare::Target::kValue,
                    EtcdCompare::Result::kEqual, 0, "a"};
  EtcdCompare mod{key, EtcdCompare::Target::kMod, EtcdCompare::Result::kEqual,
                  kv.mod_revision, ""};
  auto third = c->Txn({value, mod}, {EtcdOp::Put(key, "c")});
  ASSERT_TRUE(third.ok());
  EXPECT_TRUE(third->succeeded);
  auto stale = c->Txn({mod}, {EtcdOp::Put(key, "d")});  // mod moved on
  ASSERT_TRUE(stale.ok());
  EXPECT_FALSE(stale->succeeded);
  EXPECT_EQ(c->RangePrefix(key)->kvs[0].value, "c");
}

TEST_F(EtcdTest, LeaseGrantKeepAliveRevoke) {
  auto c = Client({endpoint_});
  auto lease = c->Grant(30);
  ASSERT_TRUE(lease.ok()) << lease.status();
  auto ttl = c->KeepAlive(*lease);
  ASSERT_TRUE(ttl.ok()) << ttl.status();
  EXPECT_EQ(*ttl, 30);
  const std::string key = prefix_ + "/leased";
  ASSERT_TRUE(c->Txn({}, {EtcdOp::Put(key, "x", *lease)}).ok());
  EXPECT_EQ(c->RangePrefix(key)->kvs.at(0).lease, *lease);
  ASSERT_TRUE(c->Revoke(*lease).ok());
  EXPECT_TRUE(c->RangePrefix(key)->kvs.empty());  // gone with its lease
  EXPECT_EQ(c->KeepAlive(*lease).status().code(), absl::StatusCode::kNotFound);
  absl::Status again = c->Revoke(*lease);
  EXPECT_TRUE(again.ok()) << again;
}

TEST_F(EtcdTest, EmptyPrefixAndUnreachableEtcdAreRefused) {
  EtcdStateStoreOptions o;
  o.client.endpoints = {endpoint_};
  o.prefix = "/";
  EXPECT_EQ(EtcdStateStore::Open(o).status().code(),
            absl::StatusCode::kInvalidArgument);
  o.prefix = "/p";
  const std::string dead = DeadEndpoint();
  o.client.endpoints = {dead};
  auto store = EtcdStateStore::Open(o);
  EXPECT_EQ(store.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(store.status().message()),
              HasSubstr("etcd " + dead + " unreachable"));
}

Member TestMember(int i) {
  Member m;
  m.worker_id = "id-" + std::to_string(i);
  m.name = "w" + std::to_string(i);
  m.token = "token-" + std::to_string(i);
  m.address = "127.0.0.1:" + std::to_string(9000 + i);
  m.labels = {{"node", "n" + std::to_string(i)}};
  m.device.kind = "cuda";
  m.device.memory_bytes = int64_t{80} << 30;
  m.device.count = 1;
  m.state = i == 2 ? MemberState::kSpare : MemberState::kActive;
  m.rank = i == 2 ? -1 : i;
  m.join_seq = 10 - i;  // loaded in join order: id-2 first
  m.epoch = 2;
  m.step = 40 + i;
  m.reason = i == 2 ? "spare" : "";
  return m;
}

std::vector<plan::Move> TestMoves(int n) {
  std::vector<plan::Move> moves;
  for (int i = 0; i < n; ++i) {
    plan::Move m;
    m.source_member = "id-0";
    m.source_rank = 0;
    m.dest_member = "id-1";
    m.dest_rank = 1;
    m.dest_offset_in_bucket = i * 8;
    m.param_index = i % 3;
    m.begin = i * 100;
    m.end = i * 100 + 50 + i;
    moves.push_back(m);
  }
  return moves;
}

StoredEpoch TestEpoch(int64_t number, EpochStatus status, int moves) {
  StoredEpoch e;
  e.status = status;
  e.plan.epoch = number;
  e.plan.base_epoch = number - 1;
  e.plan.world = 2;
  e.plan.instances = 1;
  e.plan.plan_hash = "hash-" + std::to_string(number);
  e.plan.resume_step = 10 * number;
  e.plan.moves = TestMoves(moves);
  e.plan.summary.moves = moves;
  e.plan.summary.bytes_moved = 1234 * number;
  e.plan.commit_values = {0.5, 1.5};
  e.plan.reason = "reason " + std::to_string(number);
  for (int r = 0; r < 2; ++r) {
    Slot s;
    s.worker_id = "id-" + std::to_string(r);
    s.rank = r;
    s.instance = 0;
    s.shard_rank = r;
    e.plan.slots.push_back(s);
  }
  return e;
}

// One batch with every kind of row, as the membership writes them.
StoreWrite FullWrite() {
  StoreWrite w;
  for (int i = 0; i < 4; ++i) w.members.push_back(TestMember(i));
  w.deleted_members = {"id-3"};
  w.epochs = {TestEpoch(1, EpochStatus::kAbandoned, 0),
              TestEpoch(2, EpochStatus::kStable, 5),
              TestEpoch(3, EpochStatus::kCommitted, 7),
              TestEpoch(4, EpochStatus::kProposed, 3)};
  w.meta = {{"next_epoch", 5}, {"failed", 0}};
  for (int i = 0; i < 3; ++i) {
    w.events.push_back(Event{100 + i, 2, "kind" + std::to_string(i),
                             "reason " + std::to_string(i), 0});
  }
  CheckpointRecord c;
  c.job = "demo";
  c.step = 20;
  c.dir = "/ckpt/step-20";
  c.files.push_back(
      CheckpointFileInfo{"slot-1/rank-0", 0, 10, "abc", {{0, 0, 0, 5}}, 1});
  c.tensor = 2;
  c.slot_params = {1, 1};
  w.checkpoints = {c};
  return w;
}

void ExpectSameState(const StoredState& a, const StoredState& b) {
  EXPECT_EQ(a.job_name, b.job_name);
  EXPECT_EQ(a.job_spec_json, b.job_spec_json);
  ASSERT_EQ(a.members.size(), b.members.size());
  for (size_t i = 0; i < a.members.size(); ++i) {
    const Member& x = a.members[i];
    const Member& y = b.members[i];
    EXPECT_EQ(MemberJson(x), MemberJson(y));
  }
  ASSERT_EQ(a.epochs.size(), b.epochs.size());
  for (size_t i = 0; i < a.epochs.size(); ++i) {
    EXPECT_EQ(EpochRowJson(a.epochs[i]), EpochRowJson(b.epochs[i]));
    EXPECT_EQ(MovesJson(a.epochs[i].plan.moves),
              MovesJson(b.epochs[i].plan.moves));
  }
  ASSERT_EQ(a.history.size(), b.history.size());
  for (size_t i = 0; i < a.history.size(); ++i) {
    EXPECT_EQ(EpochRowJson(a.history[i]), EpochRowJson(b.history[i]));
  }
  EXPECT_EQ(a.meta, b.meta);
  ASSERT_EQ(a.checkpoints.size(), b.checkpoints.size());
  for (size_t i = 0; i < a.checkpoints.size(); ++i) {
    EXPECT_EQ(CheckpointJson(a.checkpoints[i]),
              CheckpointJson(b.checkpoints[i]));
  }
}

TEST_F(EtcdTest, BothStoresHoldTheSameData) {
  zshard::testing::TempDir dir;
  auto sqlite = SqliteStateStore::Open(dir.File("state")).value();
  auto etcd = Store();
  ASSERT_NE(etcd, nullptr);
  for (StateStore* s : {static_cast<StateStore*>(sqlite.get()),
                        static_cast<StateStore*>(etcd.get())}) {
    ASSERT_TRUE(s->SaveJob("demo", R"({"name":"demo"})").ok());
    ASSERT_TRUE(s->Apply(FullWrite()).ok());
    // A status change that keeps the moves, and a second batch of events;
    // merged batches (StoreWriter::Merge) name an epoch twice: new moves,
    // then a status change that keeps them.
    StoreWrite later;
    later.epochs = {TestEpoch(3, EpochStatus::kStable, 0),
                    TestEpoch(4, EpochStatus::kProposed, 6),
                    TestEpoch(4, EpochStatus::kCommitted, 0)};
    later.epochs[0].moves_unchanged = true;
    later.epochs[2].moves_unchanged = true;
    later.events = {Event{200, 3, "stable", "all acked", 0}};
    ASSERT_TRUE(s->Apply(later).ok());
  }
  auto a = sqlite->Load();
  auto b = etcd->Load();
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  ExpectSameState(*a, *b);
  // The values the comparison covers.
  ASSERT_EQ(b->members.size(), 3u);
  EXPECT_EQ(b->members[0].worker_id, "id-2");
  ASSERT_EQ(b->epochs.size(), 2u);  // from the latest stable one (3) on
  EXPECT_EQ(b->epochs[0].plan.epoch, 3);
  EXPECT_EQ(b->epochs[0].plan.moves.size(), 7u);  // kept by moves_unchanged
  EXPECT_EQ(b->epochs[1].status, EpochStatus::kCommitted);
  EXPECT_EQ(b->epochs[1].plan.moves.size(), 6u);  // from the merged batch
  ASSERT_EQ(b->history.size(), 4u);
  auto ea = sqlite->RecentEvents(10).value();
  auto eb = etcd->RecentEvents(10).value();
  ASSERT_EQ(eb.size(), 4u);
  ASSERT_EQ(ea.size(), eb.size());
  for (size_t i = 0; i < ea.size(); ++i) {
    EXPECT_EQ(ea[i].seq, eb[i].seq);
    EXPECT_EQ(ea[i].kind, eb[i].kind);
    EXPECT_EQ(ea[i].reason, eb[i].reason);
    EXPECT_EQ(ea[i].time_ms, eb[i].time_ms);
    EXPECT_EQ(ea[i].epoch, eb[i].epoch);
  }
  EXPECT_EQ(eb.back().seq, 4);
  EXPECT_EQ(etcd->SaveJob("other", "{}").code(),
            absl::StatusCode::kFailedPrecondition);
}

// 600 epochs: the load reads back from the newest through the latest
// stable one and 256 for the history, as SQLite does, in pages.
TEST_F(EtcdTest, LoadOfALongHistoryMatchesSqlite) {
  zshard::testing::TempDir dir;
  auto sqlite = SqliteStateStore::Open(dir.File("state")).value();
  auto etcd = Store();
  ASSERT_NE(etcd, nullptr);
  for (int batch = 0; batch < 6; ++batch) {
    StoreWrite w;
    for (int i = 1; i <= 100; ++i) {
      const int64_t n = batch * 100 + i;
      // The latest stable epoch is 300; later ones are abandoned, one
      // committed.
      const EpochStatus status = n == 300   ? EpochStatus::kStable
                                 : n == 550 ? EpochStatus::kCommitted
                                 : n < 300  ? EpochStatus::kBroken
                                            : EpochStatus::kAbandoned;
      w.epochs.push_back(TestEpoch(n, status, n % 3));
    }
    ASSERT_TRUE(sqlite->Apply(w).ok());
    ASSERT_TRUE(etcd->Apply(w).ok());
  }
  auto a = sqlite->Load().value();
  auto b = etcd->Load().value();
  ExpectSameState(a, b);
  ASSERT_EQ(b.epochs.size(), 301u);  // 300 ... 600
  EXPECT_EQ(b.epochs.front().plan.epoch, 300);
  EXPECT_EQ(b.epochs[250].plan.moves.size(), 550u % 3);
  ASSERT_EQ(b.history.size(), static_cast<size_t>(kHistoryEpochs));
  EXPECT_EQ(b.history.front().plan.epoch, 600 - kHistoryEpochs + 1);
}

TEST_F(EtcdTest, LongMoveListsSpanChunksAndShrink) {
  auto store = Store(100000, /*moves_per_chunk=*/3);
  ASSERT_NE(store, nullptr);
  StoreWrite w;
  w.epochs = {TestEpoch(1, EpochStatus::kCommitted, 10)};
  ASSERT_TRUE(store->Apply(w).ok());
  auto chunks = store->client()->RangePrefix(prefix_ + "/moves/");
  ASSERT_TRUE(chunks.ok());
  EXPECT_EQ(chunks->kvs.size(), 4u);  // 3 + 3 + 3 + 1
  auto loaded = store->Load().value();
  ASSERT_EQ(loaded.epochs.size(), 1u);
  EXPECT_EQ(MovesJson(loaded.epochs[0].plan.moves), MovesJson(TestMoves(10)));
  w.epochs = {TestEpoch(1, EpochStatus::kCommitted, 4)};
  ASSERT_TRUE(store->Apply(w).ok());
  EXPECT_EQ(store->client()->RangePrefix(prefix_ + "/moves/")->kvs.size(), 2u);
  loaded = store->Load().value();
  EXPECT_EQ(MovesJson(loaded.epochs[0].plan.moves), MovesJson(TestMoves(4)));
}

TEST_F(EtcdTest, EventsAreTrimmedAndNumberedAcrossReopen) {
  {
    auto store = Store(/*max_events=*/5);
    ASSERT_NE(store, nullptr);
    for (int batch = 0; batch < 3; ++batch) {
      StoreWrite w;
      for (int i = 0; i < 3; ++i) w.events.push_back(Event{1, 0, "e", "r", 0});
      ASSERT_TRUE(store->Apply(w).ok());
    }
    auto events = store->RecentEvents(100).value();
    ASSERT_EQ(events.size(), 5u);
    EXPECT_EQ(events.front().seq, 5);
    EXPECT_EQ(events.back().seq, 9);
  }
  auto store = Store(5);
  ASSERT_NE(store, nullptr);
  StoreWrite w;
  w.events = {Event{1, 0, "after", "reopen", 0}};
  ASSERT_TRUE(store->Apply(w).ok());
  auto events = store->RecentEvents(2).value();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].seq, 10);
  EXPECT_EQ(events[1].kind, "after");
}

TEST_F(EtcdTest, FencedWriteFailsAndWritesNothing) {
  auto store = Store();
  ASSERT_NE(store, nullptr);
  const std::string fence = prefix_ + "/election/leader";
  auto put = store->client()->Txn({}, {EtcdOp::Put(fence, "me")});
  ASSERT_TRUE(put.ok());
  store->SetFence(fence, put->revision);
  StoreWrite w;
  w.members = {TestMember(0)};
  ASSERT_TRUE(store->Apply(w).ok());
  store->SetFence(fence, put->revision + 1000);  // another leader's key
  w.members = {TestMember(1)};
  w.events = {Event{1, 0, "e", "r", 0}};
  absl::Status refused = store->Apply(w);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.message()),
              HasSubstr("no longer the leader"));
  auto loaded = store->Load().value();
  ASSERT_EQ(loaded.members.size(), 1u);
  EXPECT_EQ(loaded.members[0].worker_id, "id-0");
  EXPECT_TRUE(store->RecentEvents(10).value().empty());
}

// A write while etcd restarts waits for it (retry_ms) and lands once.
TEST_F(EtcdTest, ApplyRidesOutAnEtcdRestart) {
  auto own = zshard::testing::EtcdServer::Start();
  ASSERT_TRUE(own.ok()) << own.status();
  EtcdStateStoreOptions o;
  o.client.endpoints = {(*own)->endpoint()};
  o.client.connect_timeout_ms = 200;
  o.prefix = prefix_;
  o.retry_ms = 20000;
  auto store = EtcdStateStore::Open(o).value();
  o.retry_ms = 300;
  auto quick = EtcdStateStore::Open(o).value();
  (*own)->Kill();
  absl::Status restarted;
  std::thread restart([&] { restarted = (*own)->Restart(); });
  StoreWrite w;
  w.members = {TestMember(0)};
  w.events = {Event{1, 0, "join", "during a restart", 0}};
  absl::Status applied = store->Apply(w);
  restart.join();
  ASSERT_TRUE(restarted.ok()) << restarted;
  ASSERT_TRUE(applied.ok()) << applied;
  EXPECT_EQ(store->Load().value().members.size(), 1u);
  auto events = store->RecentEvents(10).value();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].seq, 1);
  // With nothing to come back to, Apply gives up after retry_ms.
  (*own)->Kill();
  const auto start = std::chrono::steady_clock::now();
  absl::Status gave_up = quick->Apply(w);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(gave_up.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(gave_up.message()),
              HasSubstr("etcd " + (*own)->endpoint() + " unreachable"));
  EXPECT_GE(took, std::chrono::milliseconds(250));
  EXPECT_LT(took, std::chrono::milliseconds(5000));
}

TEST(StoreSpecTest, ParsesBothKindsAndNamesTheProblem) {
  auto sqlite = ParseStoreSpec("sqlite:/var/lib/zshard");
  ASSERT_TRUE(sqlite.ok());
  EXPECT_EQ(sqlite->kind, StoreSpec::Kind::kSqlite);
  EXPECT_EQ(sqlite->dir, "/var/lib/zshard");
  auto etcd = ParseStoreSpec("etcd:10.0.0.1:2379,etcd-1:2379/zshard/job-a/");
  ASSERT_TRUE(etcd.ok()) << etcd.status();
  EXPECT_EQ(etcd->kind, StoreSpec::Kind::kEtcd);
  EXPECT_EQ(etcd->endpoints,
            (std::vector<std::string>{"10.0.0.1:2379", "etcd-1:2379"}));
  EXPECT_EQ(etcd->prefix, "/zshard/job-a");
  const std::pair<const char*, const char*> bad[] = {
      {"", "must be sqlite:DIR or etcd:"},
      {"sqlite:", "the sqlite directory is empty"},
      {"etcd:127.0.0.1:2379", "the etcd prefix is missing"},
      {"etcd:127.0.0.1:2379/", "the etcd prefix is empty"},
      {"etcd:127.0.0.1/p", "etcd endpoint '127.0.0.1' is not HOST:PORT"},
      {"etcd:h:1,/p", "etcd endpoint '' is not HOST:PORT"},
      {"redis:h:1/p", "must be sqlite:DIR or etcd:"}};
  for (const auto& [text, why] : bad) {
    auto spec = ParseStoreSpec(text);
    EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(std::string(spec.status().message()), HasSubstr(why)) << text;
  }
}

}  // namespace
}  // namespace zshard::server
