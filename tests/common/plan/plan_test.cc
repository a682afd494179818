// Planner table cases: the worked example of docs/design.md section 4, bucket
// rules, buffer keys, expert groups, option validation, groups and hash.
#include "common/plan/plan.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace zshard::plan {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

ModelSpec Spec(const std::vector<int64_t>& sizes) {
  ModelSpec spec;
  for (size_t i = 0; i < sizes.size(); ++i) {
    ParamSpec p;
    p.name = "p" + std::to_string(i);
    p.shape = {sizes[i]};
    spec.params.push_back(p);
  }
  return spec;
}

PlanOptions Options(int world, int instances, int64_t bucket_size) {
  PlanOptions o;
  o.world = world;
  o.instances = instances;
  o.layout.bucket_size = bucket_size;
  return o;
}

struct SlotRow {
  const char* name;
  int64_t start, end;
  int bucket;
};
struct PieceRow {
  int rank, bucket;
  const char* param;
  int64_t param_start, param_end;
};

TEST(PlanTest, WorkedExampleOfDesignSection4) {
  const ModelSpec model = Spec({1000, 300, 5000, 7});
  absl::StatusOr<Plan> plan = MakePlan(model, Options(4, 1, 4000));
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->buffers.size(), 1u);
  const Buffer& buffer = plan->buffers[0];
  EXPECT_EQ(buffer.numel, 6528);
  EXPECT_EQ(buffer.shard_group_size, 4);
  ASSERT_EQ(buffer.buckets.size(), 2u);
  EXPECT_EQ(buffer.buckets[0].start, 0);
  EXPECT_EQ(buffer.buckets[0].end, 5120);
  EXPECT_EQ(buffer.buckets[0].numel_unpadded, 5064);
  EXPECT_EQ(buffer.buckets[1].start, 5120);
  EXPECT_EQ(buffer.buckets[1].end, 6528);
  EXPECT_EQ(buffer.buckets[1].numel_unpadded, 1320);
  const SlotRow slots[] = {{"p3", 0, 7, 0},
                           {"p2", 64, 5064, 0},
                           {"p1", 5120, 5420, 1},
                           {"p0", 5440, 6440, 1}};
  ASSERT_EQ(buffer.params.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    const ParamSlot& s = buffer.params[i];
    EXPECT_EQ(model.params[s.param_index].name, slots[i].name);
    EXPECT_EQ(s.start, slots[i].start) << slots[i].name;
    EXPECT_EQ(s.end, slots[i].end) << slots[i].name;
    EXPECT_EQ(s.bucket, slots[i].bucket) << slots[i].name;
  }
  const PieceRow pieces[] = {{0, 0, "p3", 0, 7},       {0, 0, "p2", 0, 1216},
                             {0, 1, "p1", 0, 300},     {0, 1, "p0", 0, 32},
                             {1, 0, "p2", 1216, 2496}, {1, 1, "p0", 32, 384},
                             {3, 0, "p2", 3776, 5000}};
  for (const PieceRow& want : pieces) {
    RankPlan rank = MakeRankPlan(model, *plan, want.rank);
    bool found = false;
    for (const Shard& shard : rank.shards) {
      if (shard.bucket != want.bucket) continue;
      for (const Piece& p : shard.pieces) {
        if (model.params[p.param_index].name != want.param) continue;
        found = true;
        EXPECT_EQ(p.param_start, want.param_start) << want.param;
        EXPECT_EQ(p.param_end, want.param_end) << want.param;
      }
    }
    EXPECT_TRUE(found) << "rank " << want.rank << " " << want.param;
  }
  RankPlan r1 = MakeRankPlan(model, *plan, 1);
  ASSERT_EQ(r1.shards.size(), 2u);
  EXPECT_EQ(r1.shards[0].start, 1280);
  EXPECT_EQ(r1.shards[0].end, 2560);
  EXPECT_EQ(r1.shards[1].start, 5472);
  EXPECT_EQ(r1.shards[1].end, 5824);
  // Rank 3's window of bucket 1 [6176, 6528) holds p0's last 264 elements
  // and 88 elements of padding.
  RankPlan r3 = MakeRankPlan(model, *plan, 3);
  ASSERT_EQ(r3.shards[1].pieces.size(), 1u);
  EXPECT_EQ(r3.shards[1].pieces[0].param_start, 736);
  EXPECT_EQ(r3.shards[1].pieces[0].param_end, 1000);
}

TEST(PlanTest, SharedEmbeddingGetsItsOwnBucketCountingTheGap) {
  ModelSpec model = Spec({100, 1000, 10});  // registered p0, p1, p2
  model.params[1].shared_embedding = true;
  absl::StatusOr<Plan> plan = MakePlan(model, Options(2, 1, 1 << 20));
  ASSERT_TRUE(plan.ok()) << plan.status();
  const Buffer& b = plan->buffers[0];
  ASSERT_EQ(b.buckets.size(), 3u);
  // p2 at [0,10); the embedding would start at 64: bucket 0 unpadded 64.
  EXPECT_EQ(b.buckets[0].numel_unpadded, 64);
  EXPECT_EQ(b.buckets[0].end, 128);
  EXPECT_EQ(b.params[1].start, 128);
  EXPECT_EQ(b.params[1].bucket, 1);
  EXPECT_EQ(b.buckets[1].numel_unpadded, 1000);
  EXPECT_EQ(b.buckets[1].end, 128 + 1024);
  EXPECT_EQ(b.params[2].start, 1152);
  EXPECT_EQ(b.params[2].bucket, 2);
}

TEST(PlanTest, BuffersByKeyInReverseRegistrationOrder) {
  ModelSpec model = Spec({10, 20, 30, 40});
  model.params[0].dtype = DType::kFp32;
  model.params[1].expert = true;
  PlanOptions o = Options(8, 2, 0);
  o.layout.expert_parallel = 2;
  absl::StatusOr<Plan> plan = MakePlan(model, o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->buffers.size(), 3u);
  EXPECT_EQ(plan->buffers[0].key.param_dtype, DType::kBf16);
  EXPECT_FALSE(plan->buffers[0].key.expert);
  EXPECT_EQ(plan->buffers[0].params.size(), 2u);  // p3 then p2
  EXPECT_EQ(plan->buffers[0].params[0].param_index, 3);
  EXPECT_TRUE(plan->buffers[1].key.expert);
  EXPECT_EQ(plan->buffers[1].shard_group_size, 2);  // D = 4, E = 2
  EXPECT_EQ(plan->buffers[2].key.param_dtype, DType::kFp32);
  EXPECT_EQ(plan->buffers[2].key.grad_dtype, DType::kFp32);
  EXPECT_EQ(plan->bucket_size, 40'000'000);
  // Shard rank 3 of the expert buffer is expert shard 3 / 2 = 1.
  RankPlan r = MakeRankPlan(model, *plan, 7);
  EXPECT_EQ(r.instance, 1);
  EXPECT_EQ(r.shard_rank, 3);
  EXPECT_EQ(r.shards[1].start, 64);
  EXPECT_EQ(r.shards[1].end, 128);
}

TEST(PlanTest, GradReduceInFp32AndHighBusbwPadding) {
  ModelSpec model = Spec({10});
  PlanOptions o = Options(3, 1, 0);
  o.layout.grad_reduce_in_fp32 = true;
  o.layout.pad_for_high_nccl_busbw = true;
  absl::StatusOr<Plan> plan = MakePlan(model, o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->buffers[0].key.grad_dtype, DType::kFp32);
  EXPECT_EQ(plan->buffers[0].numel, 3 * 65536);
  EXPECT_EQ(BucketPadMultiple(3, false), 384);
  EXPECT_EQ(BucketPadMultiple(4096, true), 65536);
}

TEST(PlanTest, DefaultBucketSizeFollowsMaxWorld) {
  EXPECT_EQ(DefaultBucketSize(8), 40'000'000);
  EXPECT_EQ(DefaultBucketSize(1024), 1'024'000'000);
  PlanOptions o = Options(8, 1, 0);
  o.layout.max_world = 64;
  absl::StatusOr<Plan> plan = MakePlan(Spec({1}), o);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->bucket_size, 64'000'000);
}

TEST(PlanTest, RejectsBadOptions) {
  struct Case {
    int world, instances, expert_parallel;
    int64_t bucket_size;
    int max_world;
    const char* message;
  };
  const Case cases[] = {
      {0, 1, 1, 0, 0, "world must be >= 1 (got 0)"},
      {4, 0, 1, 0, 0, "instances must be >= 1 (got 0)"},
      {6, 4, 1, 0, 0, "instances (4) must divide world (6)"},
      {4, 1, 0, 0, 0, "expert_parallel must be >= 1"},
      {8, 2, 3, 0, 0, "expert_parallel (3) must divide the shard group size"},
      {4, 1, 1, -1, 0, "bucket_size must be >= 0"},
      {8, 1, 1, 0, 4, "max_world (4) is smaller than world (8)"},
  };
  for (const Case& c : cases) {
    PlanOptions o = Options(c.world, c.instances, c.bucket_size);
    o.layout.expert_parallel = c.expert_parallel;
    o.layout.max_world = c.max_world;
    absl::StatusOr<Plan> plan = MakePlan(Spec({5}), o);
    ASSERT_FALSE(plan.ok()) << c.message;
    EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(plan.status().message()), HasSubstr(c.message));
  }
  EXPECT_FALSE(MakePlan(ModelSpec{}, Options(1, 1, 0)).ok());
}

TEST(PlanTest, HugeModelFailsCleanlyInsteadOfOverflowing) {
  ModelSpec model = Spec({int64_t{1} << 62, (int64_t{1} << 62) - 1});
  absl::StatusOr<Plan> plan = MakePlan(model, Options(3, 1, 0));
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(std::string(plan.status().message()), HasSubstr("overflows"));
}

TEST(PlanTest, GroupsAndRankRange) {
  absl::StatusOr<Plan> plan = MakePlan(Spec({5}), Options(8, 2, 0));
  ASSERT_TRUE(plan.ok());
  EXPECT_THAT(IntraInstanceGroup(*plan, 5), ElementsAre(4, 5, 6, 7));
  EXPECT_THAT(InterInstanceGroup(*plan, 5), ElementsAre(1, 5));
  EXPECT_TRUE(CheckRank(*plan, 7).ok());
  EXPECT_THAT(std::string(CheckRank(*plan, 8).message()),
              HasSubstr("rank 8 is out of range [0, 8)"));
  EXPECT_FALSE(CheckRank(*plan, -1).ok());
  EXPECT_TRUE(MakeRankPlan(Spec({5}), *plan, 8).shards.empty());
}

TEST(PlanTest, HashIsPinnedAndChangesWithInputs) {
  const ModelSpec model = Spec({1000, 300, 5000, 7});
  absl::StatusOr<Plan> plan = MakePlan(model, Options(4, 1, 4000));
  ASSERT_TRUE(plan.ok());
  // Pinned: the hash must not change across builds, runs or hosts.
  EXPECT_EQ(plan->hash, "8492d2948a1c3e0e");
  EXPECT_EQ(plan->hash.size(), 16u);
  ModelSpec renamed = model;
  renamed.params[0].name = "q0";
  EXPECT_NE(MakePlan(renamed, Options(4, 1, 4000))->hash, plan->hash);
  ModelSpec flagged = model;
  flagged.params[0].no_weight_decay = true;
  EXPECT_NE(MakePlan(flagged, Options(4, 1, 4000))->hash, plan->hash);
  EXPECT_NE(MakePlan(model, Options(4, 2, 4000))->hash, plan->hash);
  EXPECT_NE(MakePlan(model, Options(4, 1, 4001))->hash, plan->hash);
}

}  // namespace
}  // namespace zshard::plan
