// The ZeRO-1 plan: buffers, buckets and per-rank shard ownership, computed
// by a pure, deterministic function of (model, layout options, world,
// instances), exactly as docs/design.md sections 3 and 4 define it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/plan/model_spec.h"

namespace zshard::plan {

// Layout options; every field has the documented default.
struct LayoutOptions {
  // Bucket size in elements. 0 means the default:
  // max(40,000,000, 1,000,000 * max_world).
  int64_t bucket_size = 0;
  // The job's max world (fixes the default bucket size for the job's life).
  // 0 means "the plan's world".
  int max_world = 0;
  // Gradients are reduced in fp32 whatever the param dtype.
  bool grad_reduce_in_fp32 = false;
  // Pad buckets to lcm(D, 128, 65536) instead of lcm(D, 128).
  bool pad_for_high_nccl_busbw = false;
  // Expert-parallel size E; expert buffers are sharded over D / E ranks.
  int expert_parallel = 1;
};

struct PlanOptions {
  int world = 1;      // W >= 1
  int instances = 1;  // I >= 1, divides W
  LayoutOptions layout;
};

struct BufferKey {
  DType param_dtype = DType::kBf16;
  DType grad_dtype = DType::kBf16;
  bool expert = false;
  bool operator==(const BufferKey& o) const {
    return param_dtype == o.param_dtype && grad_dtype == o.grad_dtype &&
           expert == o.expert;
  }
};

struct Bucket {
  int64_t start = 0;  // multiple of 128
  int64_t end = 0;    // padded end; (end - start) % shard_group_size == 0
  int64_t numel_unpadded = 0;
};

// A parameter's place in its buffer.
struct ParamSlot {
  int param_index = 0;  // index into ModelSpec::params
  int64_t start = 0;    // multiple of 64
  int64_t end = 0;      // start + numel
  int bucket = 0;
};

struct Buffer {
  BufferKey key;
  int shard_group_size = 1;  // D for dense buffers, D / E for expert buffers
  int64_t numel = 0;         // padded size (end of the last bucket)
  std::vector<Bucket> buckets;
  std::vector<ParamSlot> params;  // in buffer order (reverse registration)
};

// The part of a parameter inside one rank's shard of one bucket.
struct Piece {
  int param_index = 0;
  int64_t start = 0;  // absolute element index in the buffer
  int64_t end = 0;
  int64_t param_start = 0;  // element range of the flattened parameter
  int64_t param_end = 0;
};

// A rank's owned window of one bucket: [start, end) in the buffer.
struct Shard {
  int buffer = 0;
  int bucket = 0;
  int64_t start = 0;
  int64_t end = 0;
  std::vector<Piece> pieces;  // may be empty (padding only)
};

struct RankPlan {
  int rank = 0;
  int instance = 0;
  int shard_rank = 0;
  std::vector<Shard> shards;  // one per bucket of every buffer, buffer order
};

struct Plan {
  int world = 1;
  int instances = 1;
  int shard_group_size = 1;  // D = W / I
  int64_t bucket_size = 0;   // resolved bucket size
  LayoutOptions layout;
  std::vector<Buffer> buffers;
  std::string hash;  // hex digest of every input; stable across runs/hosts
};

// Computes the plan. InvalidArgument on bad options (world < 1, instances
// not dividing world, expert_parallel not dividing D, bucket_size < 0, ...).
absl::StatusOr<Plan> MakePlan(const ModelSpec& model,
                              const PlanOptions& options);

// Rank r's shards and pieces. Requires 0 <= rank < plan.world (see
// CheckRank); an out-of-range rank yields a RankPlan without shards.
RankPlan MakeRankPlan(const ModelSpec& model, const Plan& plan, int rank);

// OK when 0 <= rank < plan.world, else InvalidArgument naming the rank.
absl::Status CheckRank(const Plan& plan, int rank);

// The default bucket size in elements for a job whose max world is
// `max_world`: max(40,000,000, 1,000,000 * max_world).
int64_t DefaultBucketSize(int max_world);

// The padding multiple of a bucket sharded over `group_size` ranks:
// lcm(group_size, 128), or lcm(group_size, 128, 65536) with
// pad_for_high_nccl_busbw.
int64_t BucketPadMultiple(int group_size, bool pad_for_high_nccl_busbw);

// Groups (docs/design.md section 2): the intra-instance group of `rank` (its D
// ranks) and the inter-instance group (same shard_rank, every instance).
std::vector<int> IntraInstanceGroup(const Plan& plan, int rank);
std::vector<int> InterInstanceGroup(const Plan& plan, int rank);

}  // namespace zshard::plan
