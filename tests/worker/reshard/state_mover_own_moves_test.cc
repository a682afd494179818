// StateMover given only each member's own moves (as WatchPlan sends them),
// over real Gloo pair links on 127.0.0.1, every worker a thread. Three
// members: "s" leaves and only sends, "b" receives from two peers, "a"
// both sends to and receives from "b" over one link. The result must be
// bit for bit the full list's, whatever order the own moves come in; and
// Abort ends a member blocked on a peer that never comes promptly.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "client/worker/comm/memory_kv_store.h"
#include "client/worker/reshard/state_mover.h"
#include "gtest/gtest.h"
#include "tests/testing/wait_for.h"
#include "tests/worker/reshard/move_util.h"
#include "tests/worker/reshard/state_pattern.h"

namespace zshard::reshard {
namespace {

const std::vector<std::string> kOld = {"s", "a", "b"};  // W = 3
const std::vector<std::string> kNew = {"b", "a"};       // W = 2

// One member's run: its buffers, its result and its new state's bytes.
struct Member {
  std::unique_ptr<engine::EngineBuffers> old_state, new_state;
  std::unique_ptr<StateMover> mover;
  absl::StatusOr<MoveStats> result = absl::UnknownError("not run");
};

int IndexOf(const std::vector<std::string>& v, const std::string& id) {
  auto it = std::find(v.begin(), v.end(), id);
  return it == v.end() ? -1 : static_cast<int>(it - v.begin());
}

// The moves that name `id` as their sender or receiver, in reverse index
// order (the mover must sort them).
std::vector<plan::Move> OwnMoves(const std::vector<plan::Move>& all,
                                 const std::string& id) {
  std::vector<plan::Move> own;
  for (const plan::Move& m : all) {
    if (m.source_member == id || m.dest_member == id) own.push_back(m);
  }
  std::reverse(own.begin(), own.end());
  return own;
}

// Every window's master, m and v, in order.
std::vector<float> Dump(const engine::EngineBuffers& b) {
  std::vector<float> out;
  for (size_t w = 0; w < b.windows().size(); ++w) {
    for (engine::StateArray a :
         {engine::StateArray::kMaster, engine::StateArray::kExpAvg,
          engine::StateArray::kExpAvgSq}) {
      const std::vector<float> v =
          testing::ReadArray(b, a, static_cast<int>(w));
      out.insert(out.end(), v.begin(), v.end());
    }
  }
  return out;
}

// A MemoryKvStore that remembers whether a key containing `watch` was set.
class WatchingStore final : public comm::KvStore {
 public:
  explicit WatchingStore(std::string watch) : watch_(std::move(watch)) {}
  absl::Status Set(absl::string_view key, absl::string_view value) override {
    if (key.find(watch_) != absl::string_view::npos) seen_ = true;
    return inner_.Set(key, value);
  }
  absl::StatusOr<std::string> Get(absl::string_view key,
                                  int64_t timeout_ms) override {
    return inner_.Get(key, timeout_ms);
  }
  absl::Status Wait(const std::vector<std::string>& keys,
                    int64_t timeout_ms) override {
    return inner_.Wait(keys, timeout_ms);
  }
  bool seen() const { return seen_; }

 private:
  const std::string watch_;
  std::atomic<bool> seen_{false};
  comm::MemoryKvStore inner_;
};

class OwnMovesTest : public ::testing::Test {
 protected:
  plan::ModelSpec model_ = testing::PatternModel();
  plan::Plan old_plan_ = testing::PatternPlan(model_, 3, 1);
  plan::Plan new_plan_ = testing::PatternPlan(model_, 2, 1);
  testing::Transition t_ =
      testing::PlanTransition(model_, &old_plan_, kOld, kOld, new_plan_, kNew);

  // Members `ids`, each given the moves `moves_of` returns for it.
  template <typename MovesOf>
  std::map<std::string, Member> Make(const std::vector<std::string>& ids,
                                     comm::KvStore* store, int64_t timeout_ms,
                                     MovesOf moves_of) {
    std::map<std::string, Member> runs;
    for (const std::string& id : ids) {
      Member& r = runs[id];
      r.old_state = testing::FreshBuffers(model_, old_plan_, IndexOf(kOld, id));
      testing::FillPattern(*r.old_state);
      if (IndexOf(kNew, id) >= 0) {
        r.new_state =
            testing::FreshBuffers(model_, new_plan_, IndexOf(kNew, id));
      }
      MoveInput in;
      in.self = id;
      in.old_state = r.old_state.get();
      in.new_state = r.new_state.get();
      in.moves = moves_of(id);
      in.store = store;
      in.timeout_ms = timeout_ms;
      in.chunk_bytes = 1200;
      r.mover = std::make_unique<StateMover>(std::move(in));
    }
    return runs;
  }

  static void RunAll(std::map<std::string, Member>& runs) {
    std::vector<std::thread> threads;
    for (auto& [id, r] : runs) {
      threads.emplace_back([&r = r] { r.result = r.mover->Run(); });
    }
    for (std::thread& t : threads) t.join();
  }
};

TEST_F(OwnMovesTest, PlanHasTheRolesThisTestNeeds) {
  std::map<std::string, std::set<std::string>> sources;  // by receiver
  std::set<std::string> receivers;
  for (int i = 0; i < static_cast<int>(t_.moves.size()); ++i) {
    const plan::Move& m = t_.moves[i];
    EXPECT_EQ(m.index, i);
    sources[m.dest_member].insert(m.source_member);
    receivers.insert(m.dest_member);
  }
  EXPECT_EQ(receivers.count("s"), 0u);  // s only sends
  EXPECT_EQ(sources["b"], (std::set<std::string>{"s", "a"}));
  EXPECT_EQ(sources["a"], (std::set<std::string>{"b"}));
}

TEST_F(OwnMovesTest, OwnMovesGiveTheFullListsResultBitForBit) {
  comm::MemoryKvStore full_store, own_store;
  std::map<std::string, Member> full = Make(
      kOld, &full_store, 10000, [&](const std::string&) { return t_.moves; });
  std::map<std::string, Member> own =
      Make(kOld, &own_store, 10000,
           [&](const std::string& id) { return OwnMoves(t_.moves, id); });
  RunAll(full);
  RunAll(own);
  int64_t sent = 0, received = 0;
  for (const std::string& id : kOld) {
    ASSERT_TRUE(full[id].result.ok()) << id << ": " << full[id].result.status();
    ASSERT_TRUE(own[id].result.ok()) << id << ": " << own[id].result.status();
    const MoveStats& f = *full[id].result;
    const MoveStats& o = *own[id].result;
    EXPECT_EQ(o.bytes_sent, f.bytes_sent) << id;
    EXPECT_EQ(o.bytes_received, f.bytes_received) << id;
    EXPECT_EQ(o.bytes_kept, f.bytes_kept) << id;
    sent += o.bytes_sent;
    received += o.bytes_received;
    if (own[id].new_state == nullptr) {
      EXPECT_GT(o.bytes_sent, 0) << id;  // s: sends only
      continue;
    }
    EXPECT_EQ(testing::PatternMismatches(*own[id].new_state, id), 0);
    EXPECT_EQ(Dump(*own[id].new_state), Dump(*full[id].new_state)) << id;
  }
  EXPECT_EQ(sent, t_.plan.bytes_moved);
  EXPECT_EQ(received, t_.plan.bytes_moved);
}

TEST_F(OwnMovesTest, MemberMoveWithoutIndexIsInvalidArgument) {
  comm::MemoryKvStore store;
  std::map<std::string, Member> runs =
      Make({"s"}, &store, 10000, [&](const std::string& id) {
        std::vector<plan::Move> own = OwnMoves(t_.moves, id);
        own.front().index = -1;
        return own;
      });
  absl::StatusOr<MoveStats> r = runs["s"].mover->Run();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument)
      << r.status();
  EXPECT_EQ(store.size(), 0u);  // refused before any rendezvous
}

TEST_F(OwnMovesTest, AbortEndsAMemberWaitingForAPeerThatNeverComesPromptly) {
  // "a" never runs: "b", after its first moves from "s", waits for its
  // link to "a" while its link to "s" may still be open.
  WatchingStore store("moves/a/b");
  std::map<std::string, Member> runs =
      Make({"s", "b"}, &store, /*timeout_ms=*/60000,
           [&](const std::string& id) { return OwnMoves(t_.moves, id); });
  Member& rs = runs["s"];
  Member& rb = runs["b"];
  std::thread s([&rs] { rs.result = rs.mover->Run(); });
  std::thread b([&rb] { rb.result = rb.mover->Run(); });
  const bool waiting = testing::WaitFor([&] { return store.seen(); }, 10000);
  const auto t0 = std::chrono::steady_clock::now();
  rb.mover->Abort();
  rs.mover->Abort();
  b.join();
  s.join();
  ASSERT_TRUE(waiting);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  EXPECT_EQ(rb.result.status().code(), absl::StatusCode::kAborted)
      << rb.result.status();
}

}  // namespace
}  // namespace zshard::reshard
