// State-movement invariants over seeded random layouts and membership
// changes (world, instances, expert parallelism, deaths, newcomers,
// partial checkpoints): after applying the moves every new owner holds
// exactly its ranges, nothing moves that did not need to, and moved bytes
// equal the lower bound whenever nothing is lost.
#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "common/plan/moves.h"
#include "common/plan/ownership.h"
#include "common/plan/plan.h"
#include "gtest/gtest.h"
#include "tests/common/plan/move_checker.h"

namespace zshard::plan {
namespace {

struct Case {
  Ownership previous;
  std::vector<std::string> alive;
  std::vector<CheckpointFragment> fragments;
  Ownership next;
};

int64_t LogUniform(std::mt19937_64& rng, double lo, double hi) {
  std::uniform_real_distribution<double> u(std::log(lo), std::log(hi));
  return static_cast<int64_t>(std::exp(u(rng)));
}

Ownership RandomOwnership(std::mt19937_64& rng, const ModelSpec& model,
                          int expert_parallel, int64_t bucket_size,
                          std::vector<Member> pool) {
  PlanOptions options;
  options.instances = 1 + static_cast<int>(rng() % 3);
  const int d = expert_parallel * (1 + static_cast<int>(rng() % 4));
  options.world = std::min<int>(options.instances * d, 12);
  options.world -= options.world % (options.instances * expert_parallel);
  if (options.world == 0) {
    options.instances = 1;
    options.world = expert_parallel;
  }
  options.layout.bucket_size = bucket_size;
  options.layout.expert_parallel = expert_parallel;
  std::shuffle(pool.begin(), pool.end(), rng);
  pool.resize(options.world);
  absl::StatusOr<Plan> plan = MakePlan(model, options);
  EXPECT_TRUE(plan.ok()) << plan.status();
  absl::StatusOr<Ownership> own = MakeOwnership(model, *plan, pool);
  EXPECT_TRUE(own.ok()) << own.status();
  return *own;
}

ModelSpec RandomModel(std::mt19937_64& rng, int expert_parallel) {
  ModelSpec model;
  const int n = 1 + static_cast<int>(rng() % 8);
  for (int i = 0; i < n; ++i) {
    ParamSpec p;
    p.name = "p" + std::to_string(i);
    p.shape = {LogUniform(rng, 1, 3000)};
    p.dtype = static_cast<DType>(rng() % 3);
    p.expert = expert_parallel > 1 && rng() % 2 == 0;
    p.shared_embedding = rng() % 8 == 0;
    model.params.push_back(p);
  }
  return model;
}

Case RandomCase(uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int expert_parallel = rng() % 3 == 0 ? 2 : 1;
  const ModelSpec model = RandomModel(rng, expert_parallel);
  std::vector<Member> pool;
  for (int i = 0; i < 16; ++i) {
    pool.push_back({"w" + std::to_string(i), "n" + std::to_string(rng() % 4)});
  }
  // Bucket size is fixed for a job; a restore may use another one.
  const int64_t bucket_size = LogUniform(rng, 64, 8000);
  Case c;
  c.previous = RandomOwnership(rng, model, expert_parallel, bucket_size, pool);
  for (const Member& m : c.previous.members) {
    if (rng() % 4 != 0) c.alive.push_back(m.id);
  }
  c.next = RandomOwnership(rng, model, expert_parallel, bucket_size, pool);
  if (rng() % 2 == 0) {
    const Ownership writer = RandomOwnership(rng, model, expert_parallel,
                                             LogUniform(rng, 64, 8000), pool);
    const int d = writer.world / writer.instances;
    for (const OwnedRange& r : writer.ranges) {
      if (r.rank < d && rng() % 10 != 0) {
        c.fragments.push_back({r.param_index, r.expert_rank, r.begin, r.end});
      }
    }
  }
  return c;
}

// MakeOwnership generates ranges directly; they must equal the pieces of
// MakeRankPlan for every rank.
TEST(MovesInvariantsTest, OwnershipMatchesRankPlans) {
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    SCOPED_TRACE(seed);
    std::mt19937_64 rng(seed);
    const int expert_parallel = 1 + static_cast<int>(rng() % 3);
    const ModelSpec model = RandomModel(rng, expert_parallel);
    PlanOptions options;
    options.instances = 1 + static_cast<int>(rng() % 3);
    options.world =
        options.instances * expert_parallel * (1 + static_cast<int>(rng() % 5));
    options.layout.expert_parallel = expert_parallel;
    options.layout.bucket_size = LogUniform(rng, 64, 8000);
    const Plan plan = *MakePlan(model, options);
    std::vector<Member> members;
    for (int r = 0; r < plan.world; ++r) {
      members.push_back({"w" + std::to_string(r), ""});
    }
    absl::StatusOr<Ownership> own = MakeOwnership(model, plan, members);
    ASSERT_TRUE(own.ok()) << own.status();
    std::vector<std::tuple<int, int, int64_t, int, int64_t, int, int, int64_t>>
        expected, actual;
    for (int r = 0; r < plan.world; ++r) {
      const RankPlan rank = MakeRankPlan(model, plan, r);
      for (const Shard& shard : rank.shards) {
        const Buffer& buffer = plan.buffers[shard.buffer];
        for (const Piece& p : shard.pieces) {
          expected.emplace_back(
              p.param_index,
              buffer.key.expert ? rank.shard_rank % expert_parallel : 0,
              p.param_start, r, p.param_end, shard.buffer, shard.bucket,
              p.start - buffer.buckets[shard.bucket].start);
        }
      }
    }
    for (const OwnedRange& o : own->ranges) {
      actual.emplace_back(o.param_index, o.expert_rank, o.begin, o.rank, o.end,
                          o.buffer, o.bucket, o.offset_in_bucket);
    }
    std::sort(expected.begin(), expected.end());
    ASSERT_EQ(actual, expected);  // also checks that actual is sorted
  }
}

TEST(MovesInvariantsTest, RandomMembershipChanges) {
  int lossless = 0, lossy = 0, with_checkpoint = 0;
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    SCOPED_TRACE(seed);
    const Case c = RandomCase(seed);
    MoveOptions options;
    options.fail_on_loss = false;
    absl::StatusOr<MovePlan> plan =
        PlanMoves(c.previous, c.alive, c.fragments, c.next, options);
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_EQ(
        testing::CheckMovePlan(c.previous, c.alive, c.fragments, c.next, *plan),
        "");
    if (plan->lost.empty()) {
      ++lossless;
      ASSERT_EQ(plan->bytes_moved, plan->lower_bound_bytes);
    } else {
      ++lossy;
      ASSERT_LT(plan->bytes_moved, plan->lower_bound_bytes);
      ASSERT_EQ(
          PlanMoves(c.previous, c.alive, c.fragments, c.next).status().code(),
          absl::StatusCode::kFailedPrecondition);
    }
    with_checkpoint += plan->bytes_from_checkpoint > 0;
  }
  // The generator exercises every outcome.
  EXPECT_GT(lossless, 100);
  EXPECT_GT(lossy, 10);
  EXPECT_GT(with_checkpoint, 10);
}

}  // namespace
}  // namespace zshard::plan
