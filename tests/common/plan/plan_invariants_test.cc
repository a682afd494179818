// Planner invariants over 1,000 seeded random layouts: mixed dtypes,
// experts, shared embeddings, sizes from 1 element to hundreds of millions,
// D from 1 to 4096, I in 1..8. Ownership is checked by interval
// arithmetic, so huge params cost no more than small ones.
#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "common/plan/plan.h"
#include "gtest/gtest.h"

namespace zshard::plan {
namespace {

struct Layout {
  ModelSpec model;
  PlanOptions options;
};

int64_t LogUniform(std::mt19937_64& rng, double lo, double hi) {
  std::uniform_real_distribution<double> u(std::log(lo), std::log(hi));
  return static_cast<int64_t>(std::exp(u(rng)));
}

Layout RandomLayout(uint64_t seed) {
  std::mt19937_64 rng(seed);
  Layout l;
  const int n = 1 + static_cast<int>(rng() % 24);
  for (int i = 0; i < n; ++i) {
    ParamSpec p;
    p.name = "layers." + std::to_string(i) + ".w";
    const int64_t rows = 1 + static_cast<int64_t>(rng() % 4);
    p.shape = {rows, LogUniform(rng, 1, 1.5e8)};
    p.dtype = static_cast<DType>(rng() % 3);
    p.expert = rng() % 5 == 0;
    p.shared_embedding = rng() % 10 == 0;
    p.no_weight_decay = rng() % 2 == 0;
    l.model.params.push_back(p);
  }
  const int d = static_cast<int>(LogUniform(rng, 1, 4097));
  const int instances = 1 + static_cast<int>(rng() % 8);
  l.options.world = d * instances;
  l.options.instances = instances;
  std::vector<int> eps;
  for (int e : {1, 2, 4, 8, 3}) {
    if (d % e == 0) eps.push_back(e);
  }
  l.options.layout.expert_parallel = eps[rng() % eps.size()];
  l.options.layout.bucket_size = rng() % 4 == 0 ? 0 : LogUniform(rng, 1, 2e8);
  l.options.layout.grad_reduce_in_fp32 = rng() % 3 == 0;
  l.options.layout.pad_for_high_nccl_busbw = rng() % 4 == 0;
  return l;
}

// Checks the layout rules of one buffer.
void CheckBuffer(const Layout& l, const Plan& plan, const Buffer& b) {
  const int64_t pad = BucketPadMultiple(b.shard_group_size,
                                        plan.layout.pad_for_high_nccl_busbw);
  int64_t expected_start = 0;
  for (const Bucket& bucket : b.buckets) {
    ASSERT_EQ(bucket.start, expected_start);
    ASSERT_EQ(bucket.start % 128, 0);
    ASSERT_EQ(bucket.end % pad, 0);
    ASSERT_EQ((bucket.end - bucket.start) % b.shard_group_size, 0);
    ASSERT_GT(bucket.numel_unpadded, 0);
    ASSERT_LE(bucket.start + bucket.numel_unpadded, bucket.end);
    expected_start = bucket.end;
  }
  ASSERT_EQ(b.numel, expected_start);
  int previous_index = static_cast<int>(l.model.params.size());
  int64_t previous_end = 0;
  for (size_t i = 0; i < b.params.size(); ++i) {
    const ParamSlot& s = b.params[i];
    const ParamSpec& p = l.model.params[s.param_index];
    ASSERT_LT(s.param_index, previous_index);  // reverse registration order
    previous_index = s.param_index;
    ASSERT_EQ(s.start % 64, 0);
    ASSERT_GE(s.start, previous_end);
    ASSERT_EQ(s.end - s.start, p.numel());
    previous_end = s.end;
    ASSERT_EQ(p.dtype, b.key.param_dtype);
    ASSERT_EQ(p.expert, b.key.expert);
    const Bucket& bucket = b.buckets[s.bucket];
    ASSERT_GE(s.start, bucket.start);
    ASSERT_LE(s.end, bucket.start + bucket.numel_unpadded);
    const bool last_in_bucket =
        i + 1 == b.params.size() || b.params[i + 1].bucket != s.bucket;
    if (p.shared_embedding) {
      ASSERT_TRUE(last_in_bucket);
      ASSERT_TRUE(i == 0 || b.params[i - 1].bucket != s.bucket);
    }
    if (!last_in_bucket) {
      ASSERT_LT(s.end - bucket.start, plan.bucket_size);  // closing rule
    } else {
      const int64_t unpadded_end = bucket.start + bucket.numel_unpadded;
      const int64_t aligned = (s.end + 63) / 64 * 64;
      ASSERT_TRUE(unpadded_end == s.end || unpadded_end == aligned);
    }
  }
}

// Every element of every param is owned exactly once per instance (per
// expert-parallel rank for expert buffers), and pieces map back exactly.
void CheckOwnership(const Layout& l, const Plan& plan, uint64_t seed) {
  const int d = plan.shard_group_size;
  const int e = plan.layout.expert_parallel;
  std::map<int, std::vector<std::pair<int64_t, int64_t>>> owned;
  std::vector<int> slot_of(l.model.params.size(), -1), buffer_of(slot_of);
  for (size_t b = 0; b < plan.buffers.size(); ++b) {
    for (size_t i = 0; i < plan.buffers[b].params.size(); ++i) {
      slot_of[plan.buffers[b].params[i].param_index] = static_cast<int>(i);
      buffer_of[plan.buffers[b].params[i].param_index] = static_cast<int>(b);
    }
  }
  for (int p : slot_of) ASSERT_GE(p, 0);  // every param placed
  std::vector<RankPlan> ranks;
  for (int r = 0; r < d; ++r) ranks.push_back(MakeRankPlan(l.model, plan, r));
  for (const RankPlan& rank : ranks) {
    size_t expected_shards = 0;
    for (const Buffer& b : plan.buffers) expected_shards += b.buckets.size();
    ASSERT_EQ(rank.shards.size(), expected_shards);
    for (const Shard& shard : rank.shards) {
      const Buffer& b = plan.buffers[shard.buffer];
      const Bucket& bucket = b.buckets[shard.bucket];
      const int64_t s = (bucket.end - bucket.start) / b.shard_group_size;
      const int k = b.key.expert ? rank.shard_rank / e : rank.shard_rank;
      ASSERT_EQ(shard.start, bucket.start + k * s);
      ASSERT_EQ(shard.end - shard.start, s);
      if (b.key.expert && rank.shard_rank % e != 0) {
        // Same window as the first expert-parallel rank of its group.
        const Shard& twin = ranks[rank.shard_rank - rank.shard_rank % e]
                                .shards[&shard - rank.shards.data()];
        ASSERT_EQ(twin.start, shard.start);
        ASSERT_EQ(twin.pieces.size(), shard.pieces.size());
        continue;
      }
      for (const Piece& piece : shard.pieces) {
        ASSERT_EQ(buffer_of[piece.param_index], shard.buffer);
        const ParamSlot& slot = b.params[slot_of[piece.param_index]];
        ASSERT_EQ(slot.bucket, shard.bucket);
        ASSERT_GE(piece.start, shard.start);
        ASSERT_LE(piece.end, shard.end);
        ASSERT_LT(piece.start, piece.end);
        ASSERT_EQ(piece.param_start, piece.start - slot.start);
        ASSERT_EQ(piece.param_end, piece.end - slot.start);
        owned[piece.param_index].emplace_back(piece.param_start,
                                              piece.param_end);
      }
    }
  }
  for (size_t i = 0; i < l.model.params.size(); ++i) {
    std::vector<std::pair<int64_t, int64_t>>& ranges = owned[i];
    std::sort(ranges.begin(), ranges.end());
    int64_t next = 0;
    for (const auto& [lo, hi] : ranges) {
      ASSERT_EQ(lo, next) << "param " << i << " seed " << seed;
      next = hi;
    }
    ASSERT_EQ(next, l.model.params[i].numel()) << "param " << i;
  }
  // Other instances replicate instance 0 shard rank by shard rank.
  if (plan.instances > 1) {
    const int r = plan.world - 1;
    RankPlan other = MakeRankPlan(l.model, plan, r);
    ASSERT_EQ(other.instance, plan.instances - 1);
    const RankPlan& same = ranks[other.shard_rank];
    ASSERT_EQ(other.shards.size(), same.shards.size());
    for (size_t i = 0; i < same.shards.size(); ++i) {
      ASSERT_EQ(other.shards[i].start, same.shards[i].start);
      ASSERT_EQ(other.shards[i].pieces.size(), same.shards[i].pieces.size());
    }
  }
}

// One changed input, whichever, changes the hash.
PlanOptions Mutate(Layout* l, uint64_t seed) {
  PlanOptions o = l->options;
  ParamSpec& p = l->model.params[seed % l->model.params.size()];
  switch (seed % 9) {
    case 0:
      p.name += "x";
      break;
    case 1:
      p.shape.back() += 1;
      break;
    case 2:
      p.dtype = static_cast<DType>((static_cast<int>(p.dtype) + 1) % 3);
      break;
    case 3:
      p.expert = !p.expert;
      break;
    case 4:
      p.shared_embedding = !p.shared_embedding;
      break;
    case 5:
      p.no_weight_decay = !p.no_weight_decay;
      break;
    case 6:
      o.layout.bucket_size += 1;
      break;
    case 7:
      o.world *= 2;
      o.instances *= 2;
      break;
    case 8:
      o.layout.grad_reduce_in_fp32 = !o.layout.grad_reduce_in_fp32;
      break;
  }
  return o;
}

void CheckSeeds(uint64_t first, uint64_t count) {
  for (uint64_t seed = first; seed < first + count; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Layout l = RandomLayout(seed);
    absl::StatusOr<Plan> plan = MakePlan(l.model, l.options);
    ASSERT_TRUE(plan.ok()) << plan.status();
    for (const Buffer& b : plan->buffers) {
      CheckBuffer(l, *plan, b);
      if (testing::Test::HasFatalFailure()) return;
    }
    CheckOwnership(l, *plan, seed);
    if (testing::Test::HasFatalFailure()) return;
    absl::StatusOr<Plan> again = MakePlan(l.model, l.options);
    ASSERT_EQ(again->hash, plan->hash);
    PlanOptions mutated_options = Mutate(&l, seed);
    absl::StatusOr<Plan> mutated = MakePlan(l.model, mutated_options);
    ASSERT_TRUE(mutated.ok()) << mutated.status();
    ASSERT_NE(mutated->hash, plan->hash);
  }
}

// 1,000 layouts in eight parts so that each test stays short.
TEST(PlanInvariantsTest, Seeds0To124) { CheckSeeds(0, 125); }
TEST(PlanInvariantsTest, Seeds125To249) { CheckSeeds(125, 125); }
TEST(PlanInvariantsTest, Seeds250To374) { CheckSeeds(250, 125); }
TEST(PlanInvariantsTest, Seeds375To499) { CheckSeeds(375, 125); }
TEST(PlanInvariantsTest, Seeds500To624) { CheckSeeds(500, 125); }
TEST(PlanInvariantsTest, Seeds625To749) { CheckSeeds(625, 125); }
TEST(PlanInvariantsTest, Seeds750To874) { CheckSeeds(750, 125); }
TEST(PlanInvariantsTest, Seeds875To999) { CheckSeeds(875, 125); }

}  // namespace
}  // namespace zshard::plan
