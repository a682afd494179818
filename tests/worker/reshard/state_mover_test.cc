// StateMover over real Gloo on 127.0.0.1, every worker a thread: joins,
// leaves (sender-only members), changes of D and I and a spare taking over
// a dead rank, each with the moves PlanMoves makes; every new owned
// element must hold exactly its old value, and the bytes on the wire must
// be the planner's. Also: a corrupted chunk is DataLoss, Abort ends a run
// promptly (in the rendezvous and mid-transfer), a move these buffers do
// not hold is InvalidArgument.
#include "client/worker/reshard/state_mover.h"

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <ostream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "client/worker/comm/memory_kv_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/wait_for.h"
#include "tests/worker/reshard/move_util.h"
#include "tests/worker/reshard/state_pattern.h"

namespace zshard::reshard {
namespace {

using ::testing::HasSubstr;

// One worker of a transition: its old state (pattern), new buffers, mover.
struct Worker {
  std::string id;
  std::unique_ptr<engine::EngineBuffers> old_state;
  std::unique_ptr<engine::EngineBuffers> new_state;
  std::unique_ptr<StateMover> mover;
  absl::StatusOr<MoveStats> result = absl::UnknownError("not run");
};

int IndexOf(const std::vector<std::string>& v, const std::string& id) {
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] == id) return static_cast<int>(i);
  }
  return -1;
}

int64_t OwnedElements(const engine::EngineBuffers& b) {
  int64_t n = 0;
  for (const engine::WindowState& w : b.windows()) {
    for (const plan::Piece& p : w.pieces) n += p.end - p.start;
  }
  return n;
}

// The workers of a transition: every alive old member and every new one.
std::vector<Worker> MakeWorkers(const plan::ModelSpec& model,
                                const plan::Plan* old_plan,
                                const std::vector<std::string>& old_members,
                                const std::vector<std::string>& alive,
                                const plan::Plan& new_plan,
                                const std::vector<std::string>& new_members,
                                const std::vector<plan::Move>& moves,
                                comm::KvStore* store, int64_t timeout_ms,
                                size_t chunk_bytes = size_t{4} << 20) {
  std::set<std::string> ids(alive.begin(), alive.end());
  ids.insert(new_members.begin(), new_members.end());
  std::vector<Worker> workers;
  for (const std::string& id : ids) {
    Worker w;
    w.id = id;
    const int old_rank = IndexOf(old_members, id);
    if (old_plan != nullptr && old_rank >= 0 && IndexOf(alive, id) >= 0) {
      w.old_state = testing::FreshBuffers(model, *old_plan, old_rank);
      testing::FillPattern(*w.old_state);
    }
    const int new_rank = IndexOf(new_members, id);
    if (new_rank >= 0) {
      w.new_state = testing::FreshBuffers(model, new_plan, new_rank);
    }
    MoveInput in;
    in.self = id;
    in.old_state = w.old_state.get();
    in.new_state = w.new_state.get();
    in.moves = moves;
    in.store = store;
    in.timeout_ms = timeout_ms;
    in.chunk_bytes = chunk_bytes;
    w.mover = std::make_unique<StateMover>(std::move(in));
    workers.push_back(std::move(w));
  }
  return workers;
}

void RunAll(std::vector<Worker>& workers) {
  std::vector<std::thread> threads;
  for (Worker& w : workers) {
    threads.emplace_back([&w] { w.result = w.mover->Run(); });
  }
  for (std::thread& t : threads) t.join();
}

struct Case {
  std::string name;
  int old_world, old_instances;
  std::vector<std::string> old_members, alive;
  int new_world, new_instances;
  std::vector<std::string> new_members;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class StateMoverTest : public ::testing::TestWithParam<Case> {};

TEST_P(StateMoverTest, EveryNewOwnedElementHoldsItsOldValue) {
  const Case& c = GetParam();
  const plan::ModelSpec model = testing::PatternModel();
  const plan::Plan old_plan =
      testing::PatternPlan(model, c.old_world, c.old_instances);
  const plan::Plan new_plan =
      testing::PatternPlan(model, c.new_world, c.new_instances);
  const testing::Transition t = testing::PlanTransition(
      model, &old_plan, c.old_members, c.alive, new_plan, c.new_members);
  ASSERT_TRUE(t.plan.lost.empty());
  ASSERT_FALSE(t.moves.empty());
  comm::MemoryKvStore store;
  std::vector<Worker> workers =
      MakeWorkers(model, &old_plan, c.old_members, c.alive, new_plan,
                  c.new_members, t.moves, &store, /*timeout_ms=*/10000,
                  /*chunk_bytes=*/1200);
  RunAll(workers);

  int64_t sent = 0, received = 0;
  for (Worker& w : workers) {
    ASSERT_TRUE(w.result.ok()) << w.id << ": " << w.result.status();
    sent += w.result->bytes_sent;
    received += w.result->bytes_received;
    EXPECT_EQ(w.result->bytes_from_checkpoint, 0);
    if (w.new_state == nullptr) {
      // A member that only sends.
      EXPECT_GT(w.result->bytes_sent, 0) << w.id;
      continue;
    }
    EXPECT_EQ(testing::PatternMismatches(*w.new_state, w.id), 0);
    EXPECT_EQ(w.result->bytes_kept + w.result->bytes_received,
              12 * OwnedElements(*w.new_state))
        << w.id;
  }
  EXPECT_EQ(sent, t.plan.bytes_moved);
  EXPECT_EQ(received, t.plan.bytes_moved);
  EXPECT_EQ(t.plan.bytes_moved, t.plan.lower_bound_bytes);
}

INSTANTIATE_TEST_SUITE_P(
    Transitions, StateMoverTest,
    ::testing::Values(
        Case{"Join2To3", 2, 1, {"a", "b"}, {"a", "b"}, 3, 1, {"a", "b", "c"}},
        Case{"Leave4To2SendersOnly",
             4,
             1,
             {"a", "b", "c", "d"},
             {"a", "b", "c", "d"},
             2,
             1,
             {"a", "c"}},
        Case{"Shrink4To2KeepsI2",
             4,
             2,
             {"a", "b", "c", "d"},
             {"a", "b", "c", "d"},
             2,
             2,
             {"a", "d"}},
        Case{"Grow2To4I1ToI2",
             2,
             1,
             {"a", "b"},
             {"a", "b"},
             4,
             2,
             {"a", "b", "c", "d"}},
        Case{"SpareTakesOverDeadRankI2",
             4,
             2,
             {"a", "b", "c", "d"},
             {"a", "b", "c"},
             4,
             2,
             {"a", "b", "c", "e"}},
        Case{"FailureShrinks4I2To2I1",
             4,
             2,
             {"a", "b", "c", "d"},
             {"a", "c", "d"},
             2,
             1,
             {"d", "c"}}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

TEST(StateMoverSpareTest, MovesExactlyTheDeadRanksState) {
  const plan::ModelSpec model = testing::PatternModel();
  const plan::Plan plan = testing::PatternPlan(model, 4, 2);
  const std::vector<std::string> before = {"a", "b", "c", "d"};
  const std::vector<std::string> after = {"a", "b", "c", "e"};
  const testing::Transition t = testing::PlanTransition(
      model, &plan, before, {"a", "b", "c"}, plan, after);
  comm::MemoryKvStore store;
  std::vector<Worker> workers =
      MakeWorkers(model, &plan, before, {"a", "b", "c"}, plan, after, t.moves,
                  &store, 10000);
  RunAll(workers);
  for (Worker& w : workers) {
    ASSERT_TRUE(w.result.ok()) << w.id << ": " << w.result.status();
    if (w.id == "e") {
      EXPECT_EQ(w.result->bytes_received, 12 * OwnedElements(*w.new_state));
      EXPECT_EQ(w.result->bytes_kept, 0);
      EXPECT_EQ(testing::PatternMismatches(*w.new_state, w.id), 0);
    } else {
      EXPECT_EQ(w.result->bytes_received, 0) << w.id;
      EXPECT_EQ(w.result->bytes_kept, 12 * OwnedElements(*w.new_state));
    }
  }
  // The dead rank 3's replica is rank 1 of instance 0: only "b" sends.
  for (const plan::Move& m : t.moves) EXPECT_EQ(m.source_member, "b");
}

// One sender "a" (W=1) and one receiver "b" joining (W=2).
struct Pair {
  plan::ModelSpec model = testing::PatternModel();
  plan::Plan one = testing::PatternPlan(model, 1, 1);
  plan::Plan two = testing::PatternPlan(model, 2, 1);
  testing::Transition t =
      testing::PlanTransition(model, &one, {"a"}, {"a"}, two, {"a", "b"});
  comm::MemoryKvStore store;
};

TEST(StateMoverFaultTest, CorruptedChunkIsDataLoss) {
  Pair pair;
  std::vector<Worker> workers =
      MakeWorkers(pair.model, &pair.one, {"a"}, {"a"}, pair.two, {"a", "b"},
                  pair.t.moves, &pair.store, 20000, /*chunk_bytes=*/1200);
  // Rebuild a's mover with a hook that flips one bit of its third chunk.
  std::atomic<int> chunks{0};
  MoveInput in;
  in.self = "a";
  in.old_state = workers[0].old_state.get();
  in.new_state = workers[0].new_state.get();
  in.moves = pair.t.moves;
  in.store = &pair.store;
  in.timeout_ms = 3000;  // a send whose peer went away may end only here
  in.chunk_bytes = 1200;
  in.tamper_chunk = [&chunks](absl::Span<char> payload) {
    if (++chunks == 3) payload[payload.size() / 2] ^= 0x04;
  };
  workers[0].mover = std::make_unique<StateMover>(std::move(in));
  RunAll(workers);
  ASSERT_EQ(workers[1].id, "b");
  EXPECT_EQ(workers[1].result.status().code(), absl::StatusCode::kDataLoss)
      << workers[1].result.status();
  EXPECT_THAT(workers[1].result.status().message(),
              HasSubstr("checksum mismatch"));
  EXPECT_THAT(workers[1].result.status().message(), HasSubstr("param 'p"));
  EXPECT_FALSE(workers[0].result.ok());
}

TEST(StateMoverFaultTest, AbortDuringTheRendezvousReturnsPromptly) {
  Pair pair;
  std::vector<Worker> workers =
      MakeWorkers(pair.model, &pair.one, {"a"}, {"a"}, pair.two, {"a", "b"},
                  pair.t.moves, &pair.store, /*timeout_ms=*/60000);
  // Only "a" runs: its peer never comes.
  std::thread runner([&] { workers[0].result = workers[0].mover->Run(); });
  ASSERT_TRUE(testing::WaitFor([&] { return pair.store.size() > 0; }, 10000));
  const auto t0 = std::chrono::steady_clock::now();
  workers[0].mover->Abort();
  runner.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  EXPECT_EQ(workers[0].result.status().code(), absl::StatusCode::kAborted)
      << workers[0].result.status();
}

TEST(StateMoverFaultTest, AbortMidTransferReturnsPromptly) {
  Pair pair;
  // Eight elements per chunk: hundreds of chunks. The sender's bound is
  // short: a Gloo send blocked when its peer goes away may only end at its
  // deadline (the coordinator's abort covers that in a real transition).
  std::vector<Worker> workers =
      MakeWorkers(pair.model, &pair.one, {"a"}, {"a"}, pair.two, {"a", "b"},
                  pair.t.moves, &pair.store, 60000, /*chunk_bytes=*/96);
  StateMover* receiver = workers[1].mover.get();
  std::atomic<int> chunks{0};
  std::chrono::steady_clock::time_point aborted_at;
  MoveInput in;
  in.self = "a";
  in.old_state = workers[0].old_state.get();
  in.new_state = workers[0].new_state.get();
  in.moves = pair.t.moves;
  in.store = &pair.store;
  in.timeout_ms = 3000;
  in.chunk_bytes = 96;
  in.tamper_chunk = [&](absl::Span<char>) {
    if (++chunks == 5) {
      aborted_at = std::chrono::steady_clock::now();
      receiver->Abort();
    }
  };
  workers[0].mover = std::make_unique<StateMover>(std::move(in));
  std::chrono::steady_clock::time_point receiver_done;
  std::thread sender([&] { workers[0].result = workers[0].mover->Run(); });
  std::thread receiving([&] {
    workers[1].result = receiver->Run();
    receiver_done = std::chrono::steady_clock::now();
  });
  sender.join();
  receiving.join();
  EXPECT_LT(receiver_done - aborted_at, std::chrono::seconds(2));
  EXPECT_EQ(workers[1].result.status().code(), absl::StatusCode::kAborted)
      << workers[1].result.status();
  EXPECT_FALSE(workers[0].result.ok());
  // The abort came long before the last chunk.
  EXPECT_LT(chunks.load(), 100);
}

TEST(StateMoverFaultTest, MoveOutsideTheBuffersIsInvalidArgument) {
  Pair pair;
  auto buffers = testing::FreshBuffers(pair.model, pair.two, 1);
  plan::Move bad;
  bad.source = plan::MoveSource::kCheckpoint;
  bad.fragment = 0;
  bad.dest_rank = 1;
  bad.dest_member = "b";
  bad.param_index = 2;
  bad.begin = 0;
  bad.end = 1900;  // rank 1 owns only part of p2
  MoveInput in;
  in.self = "b";
  in.new_state = buffers.get();
  in.moves = {bad};
  in.checkpoint_files = {"rank-00000.zsc"};
  StateMover mover(std::move(in));
  absl::StatusOr<MoveStats> stats = mover.Run();
  EXPECT_EQ(stats.status().code(), absl::StatusCode::kInvalidArgument)
      << stats.status();
}

}  // namespace
}  // namespace zshard::reshard
