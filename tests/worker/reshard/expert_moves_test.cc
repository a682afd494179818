// Expert optimizer state through re-shards: StateMover over real Gloo with
// the moves PlanMoves makes, where every expert-parallel rank's state has
// its own pattern (so state of the wrong expert rank is caught): joins,
// leaves where a member's expert rank changes (its expert state must come
// from another holder, not from its own old buffers), a spare taking over,
// changes of D and I; rank files that record expert ranks and restore into
// another world; and a step engine created from moved expert state that
// trains on to the reference's masters.
#include <filesystem>
#include <map>
#include <memory>
#include <ostream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/worker/checkpoint/checkpoint_file.h"
#include "client/worker/comm/memory_kv_store.h"
#include "client/worker/engine/elements.h"
#include "client/worker/engine/engine_groups.h"
#include "client/worker/engine/master_dump.h"
#include "client/worker/reshard/state_mover.h"
#include "gtest/gtest.h"
#include "tests/worker/engine/engine_cluster.h"
#include "tests/worker/engine/expert_model.h"
#include "tests/worker/reshard/move_util.h"

namespace zshard::reshard {
namespace {

constexpr int kExperts = 2;

// The pattern of element j of param p held for expert-parallel rank e
// (always 0 for dense params). Exact in fp32.
float Pattern(int p, int e, int64_t j, int kind) {
  const float base = static_cast<float>(p + 1) + 16.f * static_cast<float>(e) +
                     static_cast<float>(j) / 8192.f;
  return kind == 0 ? base : kind == 1 ? -base / 4.f : base / 2.f;
}

// Calls fn(master, m, v, p, e, j) for every owned element of `b`.
template <typename Fn>
void ForEachOwned(engine::EngineBuffers& b, Fn fn) {
  for (size_t w = 0; w < b.windows().size(); ++w) {
    engine::WindowState& win = b.windows()[w];
    float* master = b.master(static_cast<int>(w));
    for (const plan::Piece& piece : win.pieces) {
      const int e = engine::StateExpertRank(
          b.model(), b.plan(), b.rank_plan().rank, piece.param_index);
      for (int64_t i = piece.start; i < piece.end; ++i) {
        const int64_t at = i - win.start;
        fn(master[at], win.exp_avg[at], win.exp_avg_sq[at], piece.param_index,
           e, piece.param_start + (i - piece.start));
      }
    }
  }
}

void FillPattern(engine::EngineBuffers& b) {
  ForEachOwned(b, [](float& x, float& m, float& v, int p, int e, int64_t j) {
    x = Pattern(p, e, j, 0);
    m = Pattern(p, e, j, 1);
    v = Pattern(p, e, j, 2);
  });
}

int64_t Mismatches(engine::EngineBuffers& b, const std::string& who) {
  int64_t bad = 0;
  ForEachOwned(b, [&](float& x, float& m, float& v, int p, int e, int64_t j) {
    if (x == Pattern(p, e, j, 0) && m == Pattern(p, e, j, 1) &&
        v == Pattern(p, e, j, 2)) {
      return;
    }
    if (++bad <= 3) {
      ADD_FAILURE() << who << ": param " << p << " expert rank " << e
                    << " element " << j << " master " << x;
    }
  });
  return bad;
}

int64_t OwnedElements(const engine::EngineBuffers& b) {
  int64_t n = 0;
  for (const engine::WindowState& w : b.windows()) {
    for (const plan::Piece& p : w.pieces) n += p.end - p.start;
  }
  return n;
}

int IndexOf(const std::vector<std::string>& v, const std::string& id) {
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] == id) return static_cast<int>(i);
  }
  return -1;
}

std::unique_ptr<engine::EngineBuffers> Fresh(const plan::ModelSpec& model,
                                             const plan::Plan& plan, int rank) {
  engine::SyntheticWorkload::Options o;
  o.world = plan.world;
  o.rank = rank;
  o.expert_parallel = plan.layout.expert_parallel;
  engine::SyntheticWorkload workload(model, o);
  auto b = engine::EngineBuffers::Create(model, plan, rank, workload);
  EXPECT_TRUE(b.ok()) << b.status();
  return b.ok() ? std::move(*b) : nullptr;
}

struct Case {
  std::string name;
  int old_world, old_instances;
  std::vector<std::string> old_members, alive;
  int new_world, new_instances;
  std::vector<std::string> new_members;
  int experts = kExperts;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class ExpertMovesTest : public ::testing::TestWithParam<Case> {};

TEST_P(ExpertMovesTest, EveryNewOwnedElementHoldsItsOwnExpertRanksValue) {
  const Case& c = GetParam();
  const plan::ModelSpec model = engine::testing::ExpertModel();
  const plan::Plan old_plan = engine::testing::ExpertPlan(
      model, c.old_world, c.old_instances, c.experts);
  const plan::Plan new_plan = engine::testing::ExpertPlan(
      model, c.new_world, c.new_instances, c.experts);
  const testing::Transition t = testing::PlanTransition(
      model, &old_plan, c.old_members, c.alive, new_plan, c.new_members);
  ASSERT_TRUE(t.plan.lost.empty());
  ASSERT_FALSE(t.moves.empty());
  bool expert_moves = false;
  for (const plan::Move& m : t.moves) expert_moves |= m.expert_rank > 0;
  EXPECT_TRUE(expert_moves) << "no move of expert rank > 0";

  struct Worker {
    std::string id;
    std::unique_ptr<engine::EngineBuffers> old_state, new_state;
    absl::StatusOr<MoveStats> result = absl::UnknownError("not run");
  };
  std::set<std::string> ids(c.alive.begin(), c.alive.end());
  ids.insert(c.new_members.begin(), c.new_members.end());
  std::vector<Worker> workers;
  for (const std::string& id : ids) {
    Worker w;
    w.id = id;
    const int old_rank = IndexOf(c.old_members, id);
    if (old_rank >= 0 && IndexOf(c.alive, id) >= 0) {
      w.old_state = Fresh(model, old_plan, old_rank);
      FillPattern(*w.old_state);
    }
    const int new_rank = IndexOf(c.new_members, id);
    if (new_rank >= 0) w.new_state = Fresh(model, new_plan, new_rank);
    workers.push_back(std::move(w));
  }
  comm::MemoryKvStore store;
  std::vector<std::thread> threads;
  for (Worker& w : workers) {
    threads.emplace_back([&] {
      MoveInput in;
      in.self = w.id;
      in.old_state = w.old_state.get();
      in.new_state = w.new_state.get();
      in.moves = t.moves;
      in.store = &store;
      in.timeout_ms = 10000;
      in.chunk_bytes = 1200;
      w.result = StateMover(std::move(in)).Run();
    });
  }
  for (std::thread& th : threads) th.join();

  int64_t sent = 0, received = 0;
  for (Worker& w : workers) {
    ASSERT_TRUE(w.result.ok()) << w.id << ": " << w.result.status();
    sent += w.result->bytes_sent;
    received += w.result->bytes_received;
    if (w.new_state == nullptr) continue;
    EXPECT_EQ(Mismatches(*w.new_state, w.id), 0);
    // Kept and received add up to what it owns: nothing kept from another
    // expert rank's state.
    EXPECT_EQ(w.result->bytes_kept + w.result->bytes_received,
              12 * OwnedElements(*w.new_state))
        << w.id;
  }
  EXPECT_EQ(sent, t.plan.bytes_moved);
  EXPECT_EQ(received, t.plan.bytes_moved);
  EXPECT_EQ(t.plan.bytes_moved, t.plan.lower_bound_bytes);
}

INSTANTIATE_TEST_SUITE_P(
    Transitions, ExpertMovesTest,
    ::testing::Values(
        // c goes from rank 2 (expert rank 0) to rank 1 (expert rank 1).
        Case{"Leave4To2ExpertRankChanges",
             4,
             1,
             {"a", "b", "c", "d"},
             {"a", "b", "c", "d"},
             2,
             1,
             {"a", "c"}},
        Case{"Join2To4",
             2,
             1,
             {"a", "b"},
             {"a", "b"},
             4,
             1,
             {"a", "b", "c", "d"}},
        Case{"SpareTakesOverDeadRankI2",
             4,
             2,
             {"a", "b", "c", "d"},
             {"a", "b", "c"},
             4,
             2,
             {"a", "b", "c", "e"}},
        Case{"Shrink8I2To4I1",
             8,
             2,
             {"a", "b", "c", "d", "e", "f", "g", "h"},
             {"a", "b", "c", "d", "e", "f", "g", "h"},
             4,
             1,
             {"a", "e", "c", "h"}},
        Case{"Grow4To8E4",
             4,
             1,
             {"a", "b", "c", "d"},
             {"a", "b", "c", "d"},
             8,
             1,
             {"a", "b", "c", "d", "e", "f", "g", "h"},
             4}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

// Instance 0 of W = 4, E = 2 writes its rank files; their ranges carry the
// expert ranks, and they restore into W = 2 and W = 8, I = 2.
TEST(ExpertCheckpointTest, RankFilesRestoreEachExpertRanksState) {
  const plan::ModelSpec model = engine::testing::ExpertModel();
  const std::string dir = ::testing::TempDir() + "/expert_ckpt";
  std::filesystem::remove_all(dir);
  const plan::Plan four = engine::testing::ExpertPlan(model, 4, 1, kExperts);
  std::vector<plan::CheckpointFragment> fragments;
  std::vector<std::string> files;
  std::set<int> expert_ranks;
  for (int r = 0; r < 4; ++r) {
    auto state = Fresh(model, four, r);
    FillPattern(*state);
    auto file = checkpoint::WriteRankFile(*state, dir, r, 20, 20);
    ASSERT_TRUE(file.ok()) << file.status();
    for (const plan::CheckpointFragment& f : file->ranges) {
      EXPECT_EQ(f.expert_rank, model.params[f.param_index].expert ? r % 2 : 0);
      expert_ranks.insert(f.expert_rank);
      fragments.push_back(f);
      files.push_back(file->path);
    }
  }
  EXPECT_EQ(expert_ranks, (std::set<int>{0, 1}));
  for (auto [world, instances] : {std::pair{2, 1}, std::pair{8, 2}}) {
    SCOPED_TRACE(absl::StrCat("W=", world, " I=", instances));
    const plan::Plan plan =
        engine::testing::ExpertPlan(model, world, instances, kExperts);
    std::vector<std::string> members;
    for (int r = 0; r < world; ++r) members.push_back(absl::StrCat("n", r));
    const testing::Transition t = testing::PlanTransition(
        model, nullptr, {}, {}, plan, members, fragments, files);
    ASSERT_TRUE(t.plan.lost.empty());
    int64_t from_checkpoint = 0;
    for (int r = 0; r < world; ++r) {
      auto state = Fresh(model, plan, r);
      MoveInput in;
      in.self = members[r];
      in.new_state = state.get();
      in.moves = t.moves;
      in.checkpoint_files = t.checkpoint_files;
      in.checkpoint_dir = dir;
      absl::StatusOr<MoveStats> stats = StateMover(std::move(in)).Run();
      ASSERT_TRUE(stats.ok()) << "rank " << r << ": " << stats.status();
      from_checkpoint += stats->bytes_from_checkpoint;
      EXPECT_EQ(Mismatches(*state, absl::StrCat("rank ", r)), 0);
    }
    EXPECT_EQ(from_checkpoint, t.plan.bytes_moved);
  }
}

struct Reshard {
  std::string name;
  int old_world, old_instances;
  std::vector<std::string> old_members;
  int new_world, new_instances;
  std::vector<std::string> new_members;
};

void PrintTo(const Reshard& c, std::ostream* os) { *os << c.name; }

class ExpertReshardTest : public ::testing::TestWithParam<Reshard> {};

// Two steps at the old world, the moves, StepEngine::CreateFromState on the
// moved state, two steps at the new world: the masters are the reference's
// of that world history, bit for bit (no clipping: the norm's summation
// order does not enter).
TEST_P(ExpertReshardTest, EngineOnMovedExpertStateTrainsToTheReference) {
  const Reshard& c = GetParam();
  constexpr int64_t kBatch = 16;
  constexpr int kStepsBefore = 2, kStepsAfter = 2;
  const plan::ModelSpec model = engine::testing::ExpertModel();
  const plan::Plan old_plan = engine::testing::ExpertPlan(
      model, c.old_world, c.old_instances, kExperts);
  const plan::Plan new_plan = engine::testing::ExpertPlan(
      model, c.new_world, c.new_instances, kExperts);
  job::OptimizerSpec opt;
  opt.lr = 1e-3;
  opt.weight_decay = 0.1;

  engine::testing::Cluster old_cluster;
  old_cluster.workloads =
      engine::testing::ExpertWorkloads(model, c.old_world, kExperts, kBatch);
  old_cluster.Create(model, old_plan, opt);
  for (const absl::Status& s : old_cluster.create_status) {
    ASSERT_TRUE(s.ok()) << s;
  }
  engine::ReferenceOptimizer::Options ro;
  ro.world = c.old_world;
  ro.instances = c.old_instances;
  ro.expert_parallel = kExperts;
  ro.optimizer = opt;
  auto reference = engine::testing::ExpertReference(model, ro, kBatch);
  auto reference_step = [&](engine::testing::Cluster& cluster) {
    std::vector<engine::Workload*> w;
    for (auto& x : cluster.workloads) w.push_back(x.get());
    absl::StatusOr<bool> applied = reference->Step(w);
    ASSERT_TRUE(applied.ok() && *applied) << applied.status();
  };
  for (int s = 0; s < kStepsBefore; ++s) {
    for (const engine::StepResult& r : old_cluster.Step()) {
      ASSERT_TRUE(r.status.ok()) << r.status;
    }
    reference_step(old_cluster);
  }

  const testing::Transition t = testing::PlanTransition(
      model, &old_plan, c.old_members, c.old_members, new_plan, c.new_members);
  ASSERT_TRUE(t.plan.lost.empty());
  engine::testing::Cluster cluster;
  cluster.workloads =
      engine::testing::ExpertWorkloads(model, c.new_world, kExperts, kBatch);
  cluster.engines.resize(c.new_world);
  std::set<std::string> ids(c.old_members.begin(), c.old_members.end());
  ids.insert(c.new_members.begin(), c.new_members.end());
  comm::MemoryKvStore move_store;
  std::map<std::string, absl::Status> status;
  for (const std::string& id : ids) status[id] = absl::OkStatus();
  std::vector<std::thread> threads;
  for (const std::string& id : ids) {
    threads.emplace_back([&, id] {
      const int old_rank = IndexOf(c.old_members, id);
      const int new_rank = IndexOf(c.new_members, id);
      std::unique_ptr<engine::EngineBuffers> buffers;
      if (new_rank >= 0) {
        auto b = engine::EngineBuffers::Create(model, new_plan, new_rank,
                                               *cluster.workloads[new_rank]);
        if (!b.ok()) {
          status[id] = b.status();
          return;
        }
        buffers = std::move(*b);
      }
      MoveInput in;
      in.self = id;
      in.old_state =
          old_rank >= 0 ? &old_cluster.engines[old_rank]->buffers() : nullptr;
      in.new_state = buffers.get();
      in.moves = t.moves;
      in.store = &move_store;
      in.timeout_ms = 10000;
      absl::StatusOr<MoveStats> moved = StateMover(std::move(in)).Run();
      if (!moved.ok() || new_rank < 0) {
        status[id] = moved.status();
        return;
      }
      engine::EngineConfig config;
      config.model = model;
      config.plan = new_plan;
      config.rank = new_rank;
      config.optimizer = opt;
      config.store = &cluster.store;
      engine::EngineOptions options;
      options.comm_timeout_ms = 10000;
      options.adam_threads = 1;
      auto engine = engine::StepEngine::CreateFromState(
          config, options, std::move(buffers), kStepsBefore, kStepsBefore);
      if (engine.ok()) {
        cluster.engines[new_rank] = std::move(*engine);
      } else {
        status[id] = engine.status();
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (const auto& [id, s] : status) ASSERT_TRUE(s.ok()) << id << ": " << s;

  reference->set_topology(c.new_world, c.new_instances);
  for (int s = 0; s < kStepsAfter; ++s) {
    for (const engine::StepResult& r : cluster.Step()) {
      ASSERT_TRUE(r.status.ok()) << r.status;
      EXPECT_EQ(r.telemetry.adam_step, kStepsBefore + s + 1);
    }
    reference_step(cluster);
  }
  const std::string dir =
      absl::StrCat(::testing::TempDir(), "/expert_reshard_", c.name);
  std::filesystem::remove_all(dir);
  for (auto& e : cluster.engines) {
    ASSERT_TRUE(engine::DumpMasters(e->buffers(), dir).ok());
  }
  auto masters = engine::LoadMasters(dir, model, kExperts);
  ASSERT_TRUE(masters.ok()) << masters.status();
  for (size_t p = 0; p < model.params.size(); ++p) {
    const std::vector<float>& got = masters->at(model.params[p].name);
    const std::vector<float>& want = reference->master(static_cast<int>(p));
    ASSERT_EQ(got.size(), want.size());
    for (size_t j = 0; j < got.size(); ++j) {
      ASSERT_EQ(got[j], want[j]) << model.params[p].name << "[" << j << "]";
    }
    // Every rank's params: its own expert rank's masters, rounded.
    for (int r = 0; r < c.new_world; ++r) {
      const int e =
          engine::StateExpertRank(model, new_plan, r, static_cast<int>(p));
      const std::vector<float> param =
          cluster.engines[r]->buffers().ReadParam(static_cast<int>(p));
      for (size_t j = 0; j < param.size(); ++j) {
        ASSERT_EQ(param[j], engine::RoundTo(plan::DType::kBf16,
                                            got[e * param.size() + j]))
            << "rank " << r << " " << model.params[p].name << "[" << j << "]";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Reshards, ExpertReshardTest,
    ::testing::Values(
        Reshard{"Leave4To2", 4, 1, {"a", "b", "c", "d"}, 2, 1, {"a", "c"}},
        Reshard{"Join2To4", 2, 1, {"a", "b"}, 4, 1, {"a", "b", "c", "d"}},
        Reshard{"Grow4I2To8I2",
                4,
                2,
                {"a", "b", "c", "d"},
                8,
                2,
                {"a", "b", "c", "d", "e", "f", "g", "h"}}),
    [](const ::testing::TestParamInfo<Reshard>& info) {
      return info.param.name;
    });

}  // namespace
}  // namespace zshard::reshard
