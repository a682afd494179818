// The plan update each watcher receives (PlanBytesCache, the bytes
// WatchPlan writes): its own assignment, exactly its own moves with their
// indices in the epoch's full list, in index order, and the epoch's totals;
// IndexMovesByMember, which that fan-out is built from.
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/membership/transition/epoch_moves.h"
#include "server/service/plan_watch.h"
#include "server/service/proto_convert.h"
#include "zshard/v1/types.pb.h"

namespace zshard::server {
namespace {

plan::Move MemberMove(const std::string& from, const std::string& to,
                      int64_t begin) {
  plan::Move m;
  m.source = plan::MoveSource::kMember;
  m.source_member = from;
  m.source_rank = 0;
  m.dest_member = to;
  m.param_index = 1;
  m.begin = begin;
  m.end = begin + 10;
  return m;
}

plan::Move CheckpointRead(const std::string& to, int64_t begin) {
  plan::Move m;
  m.source = plan::MoveSource::kCheckpoint;
  m.fragment = 0;
  m.checkpoint_file = "rank-00000.zsc";
  m.dest_member = to;
  m.begin = begin;
  m.end = begin + 10;
  return m;
}

// Epoch 5: ranks a, b, c, listed spare e; d leaves (DRAINING, unlisted)
// and only sends.
EpochPlan Epoch() {
  EpochPlan p;
  p.epoch = 5;
  p.base_epoch = 4;
  p.world = 3;
  p.plan_hash = "h";
  for (const char* id : {"a", "b", "c", "e"}) {
    Slot s;
    s.worker_id = id;
    s.rank = p.slots.size() < 3 ? static_cast<int>(p.slots.size()) : -1;
    p.slots.push_back(s);
  }
  p.moves = {MemberMove("a", "c", 0),  MemberMove("d", "b", 10),
             CheckpointRead("b", 20),  MemberMove("c", "c", 30),
             MemberMove("d", "a", 40), MemberMove("b", "a", 50)};
  for (int i = 0; i < static_cast<int>(p.moves.size()); ++i) {
    p.moves[i].index = i;
  }
  p.summary.moves = 6;
  p.summary.bytes_moved = 720;
  p.summary.lower_bound_bytes = 600;
  p.summary.bytes_from_checkpoint = 120;
  p.summary.bytes_same_node = 240;
  return p;
}

v1::PlanUpdate Parse(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string bytes;
  for (const grpc::Slice& s : slices) {
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  v1::PlanUpdate out;
  EXPECT_TRUE(out.ParseFromString(bytes));
  return out;
}

std::vector<int> Indices(const v1::PlanUpdate& u) {
  std::vector<int> out;
  for (const v1::Move& m : u.moves()) out.push_back(m.index());
  return out;
}

TEST(PlanUpdateFanoutTest, IndexMovesByMemberListsEachMembersMovesOnce) {
  const MovesByMember by = IndexMovesByMember(Epoch().moves);
  EXPECT_EQ(by.size(), 4u);  // a, b, c, d; never the spare
  EXPECT_EQ(by.at("a"), (std::vector<int>{0, 4, 5}));
  EXPECT_EQ(by.at("b"), (std::vector<int>{1, 2, 5}));
  EXPECT_EQ(by.at("c"), (std::vector<int>{0, 3}));  // its own copy once
  EXPECT_EQ(by.at("d"), (std::vector<int>{1, 4}));
}

TEST(PlanUpdateFanoutTest, EachWatcherGetsExactlyItsOwnMovesAndTheTotals) {
  auto update = std::make_shared<const PlanUpdate>(
      PlanUpdate{7, PlanPhase::kCommitted, Epoch()});
  v1::PlanUpdate whole;
  ToProto(*update, &whole);
  ASSERT_EQ(whole.moves_size(), 6);
  PlanBytesCache cache;
  const std::map<std::string, std::vector<int>> expected = {
      {"a", {0, 4, 5}}, {"b", {1, 2, 5}}, {"c", {0, 3}},
      {"d", {1, 4}},    {"e", {}},        {"x", {}}};
  std::set<int> delivered;
  for (const auto& [id, indices] : expected) {
    const v1::PlanUpdate u = Parse(cache.Get(update, id));
    EXPECT_EQ(Indices(u), indices) << id;
    for (const v1::Move& m : u.moves()) {
      // Each move exactly as the whole update carries it.
      EXPECT_EQ(m.SerializeAsString(),
                whole.moves(m.index()).SerializeAsString())
          << id << " move " << m.index();
      EXPECT_TRUE(m.from_worker_id() == id || m.to_worker_id() == id) << id;
      delivered.insert(m.index());
    }
    // Its own assignment only (none for d, which leaves, and x, unknown).
    const bool listed = id == "a" || id == "b" || id == "c" || id == "e";
    ASSERT_EQ(u.assignments_size(), listed ? 1 : 0) << id;
    if (listed) {
      EXPECT_EQ(u.assignments(0).worker_id(), id);
    }
    // The epoch's totals, for every watcher.
    EXPECT_EQ(u.move_summary().SerializeAsString(),
              whole.move_summary().SerializeAsString())
        << id;
    EXPECT_EQ(u.move_summary().moves(), 6) << id;
    EXPECT_EQ(u.move_summary().bytes_moved(), 720) << id;
    EXPECT_EQ(u.epoch(), 5);
    EXPECT_EQ(u.phase(), v1::PLAN_PHASE_COMMITTED);
    EXPECT_EQ(u.base_epoch(), 4);
  }
  EXPECT_EQ(delivered.size(), 6u);  // every move reaches both its ends
}

TEST(PlanUpdateFanoutTest, LaterUpdatesOfTheEpochCarryTheSameMoves) {
  PlanBytesCache cache;
  auto committed = std::make_shared<const PlanUpdate>(
      PlanUpdate{7, PlanPhase::kCommitted, Epoch()});
  auto stable = std::make_shared<const PlanUpdate>(
      PlanUpdate{8, PlanPhase::kStable, Epoch()});
  const v1::PlanUpdate c = Parse(cache.Get(committed, "b"));
  const v1::PlanUpdate s = Parse(cache.Get(stable, "b"));
  EXPECT_EQ(s.phase(), v1::PLAN_PHASE_STABLE);
  ASSERT_EQ(s.moves_size(), 3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(s.moves(i).SerializeAsString(), c.moves(i).SerializeAsString());
  }
  // A later epoch with other moves is not served the old ones.
  EpochPlan next = Epoch();
  next.epoch = 6;
  next.moves.resize(1);
  next.summary = MoveSummary{1, 120, 120, 0, 0};
  auto later = std::make_shared<const PlanUpdate>(
      PlanUpdate{9, PlanPhase::kProposed, next});
  EXPECT_EQ(Indices(Parse(cache.Get(later, "b"))), std::vector<int>{});
  EXPECT_EQ(Indices(Parse(cache.Get(later, "a"))), std::vector<int>{0});
}

TEST(PlanUpdateFanoutTest, AnEpochWithoutMovesSendsNoneAndNoSummary) {
  PlanBytesCache cache;
  EpochPlan p = Epoch();
  p.moves.clear();
  p.summary = MoveSummary();
  auto update =
      std::make_shared<const PlanUpdate>(PlanUpdate{1, PlanPhase::kStable, p});
  const v1::PlanUpdate u = Parse(cache.Get(update, "a"));
  EXPECT_EQ(u.moves_size(), 0);
  EXPECT_FALSE(u.has_move_summary());
  EXPECT_EQ(u.assignments_size(), 1);
}

}  // namespace
}  // namespace zshard::server
