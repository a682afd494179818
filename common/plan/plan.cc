// MakePlan: option validation, the buffer and bucket layout of docs/design.md
// section 3, and the plan hash.
#include "common/plan/plan.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/plan/plan_hash.h"
#include "common/status.h"

namespace zshard::plan {
namespace {

constexpr int64_t kParamAlignment = 64;

absl::Status Overflow() {
  return absl::InvalidArgumentError(
      "model too large: a buffer index overflows int64");
}

// Rounds `value` up to a multiple of `multiple`; false on overflow.
bool RoundUp(int64_t value, int64_t multiple, int64_t* out) {
  int64_t rem = value % multiple;
  if (rem == 0) {
    *out = value;
    return true;
  }
  return !__builtin_add_overflow(value, multiple - rem, out);
}

absl::Status ValidateOptions(const PlanOptions& o) {
  if (o.world < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("world must be >= 1 (got ", o.world, ")"));
  }
  if (o.instances < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("instances must be >= 1 (got ", o.instances, ")"));
  }
  if (o.world % o.instances != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "instances (", o.instances, ") must divide world (", o.world, ")"));
  }
  const LayoutOptions& l = o.layout;
  const int d = o.world / o.instances;
  if (l.expert_parallel < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expert_parallel must be >= 1 (got ", l.expert_parallel, ")"));
  }
  if (d % l.expert_parallel != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("expert_parallel (", l.expert_parallel,
                     ") must divide the shard group size D = world / "
                     "instances = ",
                     d));
  }
  if (l.bucket_size < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("bucket_size must be >= 0, 0 meaning the default (got ",
                     l.bucket_size, ")"));
  }
  if (l.max_world < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_world must be >= 0 (got ", l.max_world, ")"));
  }
  if (l.max_world > 0 && l.max_world < o.world) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_world (", l.max_world, ") is smaller than world (", o.world, ")"));
  }
  return absl::OkStatus();
}

// Places one buffer's params (already in reverse registration order) and
// closes its buckets.
absl::Status LayOutBuffer(const ModelSpec& model,
                          const std::vector<int>& param_indices,
                          int64_t bucket_size, int64_t pad_multiple,
                          Buffer* buffer) {
  int64_t bucket_start = 0;
  int64_t cursor = 0;  // end of the last placed param
  bool open_has_params = false;
  auto close_bucket = [&](int64_t unpadded_end) -> absl::Status {
    Bucket bucket;
    bucket.start = bucket_start;
    bucket.numel_unpadded = unpadded_end - bucket_start;
    if (!RoundUp(unpadded_end, pad_multiple, &bucket.end)) return Overflow();
    buffer->buckets.push_back(bucket);
    bucket_start = bucket.end;
    cursor = bucket.end;
    open_has_params = false;
    return absl::OkStatus();
  };
  for (int index : param_indices) {
    const ParamSpec& param = model.params[index];
    int64_t start = 0;
    if (!RoundUp(cursor, kParamAlignment, &start)) return Overflow();
    if (param.shared_embedding && open_has_params) {
      // The open bucket ends where the embedding would have started, so its
      // unpadded size counts the alignment gap.
      ZSHARD_RETURN_IF_ERROR(close_bucket(start));
      start = bucket_start;
    }
    ParamSlot slot;
    slot.param_index = index;
    slot.start = start;
    if (__builtin_add_overflow(start, param.numel(), &slot.end)) {
      return Overflow();
    }
    slot.bucket = static_cast<int>(buffer->buckets.size());
    buffer->params.push_back(slot);
    cursor = slot.end;
    open_has_params = true;
    if (param.shared_embedding || cursor - bucket_start >= bucket_size) {
      ZSHARD_RETURN_IF_ERROR(close_bucket(cursor));
    }
  }
  if (open_has_params) ZSHARD_RETURN_IF_ERROR(close_bucket(cursor));
  buffer->numel = bucket_start;
  return absl::OkStatus();
}

}  // namespace

int64_t DefaultBucketSize(int max_world) {
  return std::max<int64_t>(40'000'000, int64_t{1'000'000} * max_world);
}

int64_t BucketPadMultiple(int group_size, bool pad_for_high_nccl_busbw) {
  int64_t m = std::lcm(int64_t{group_size}, int64_t{128});
  if (pad_for_high_nccl_busbw) m = std::lcm(m, int64_t{65536});
  return m;
}

absl::StatusOr<Plan> MakePlan(const ModelSpec& model,
                              const PlanOptions& options) {
  ZSHARD_RETURN_IF_ERROR(ValidateOptions(options));
  ZSHARD_RETURN_IF_ERROR(ValidateModelSpec(model));
  const LayoutOptions& layout = options.layout;
  Plan plan;
  plan.world = options.world;
  plan.instances = options.instances;
  plan.shard_group_size = options.world / options.instances;
  plan.layout = layout;
  plan.bucket_size =
      layout.bucket_size > 0
          ? layout.bucket_size
          : DefaultBucketSize(layout.max_world > 0 ? layout.max_world
                                                   : options.world);

  // Buffers in order of first appearance in reverse registration order,
  // each listing its params in that same order.
  std::vector<std::vector<int>> members;
  for (int i = static_cast<int>(model.params.size()) - 1; i >= 0; --i) {
    const ParamSpec& p = model.params[i];
    BufferKey key;
    key.param_dtype = p.dtype;
    key.grad_dtype = layout.grad_reduce_in_fp32 ? DType::kFp32 : p.dtype;
    key.expert = p.expert;
    size_t b = 0;
    while (b < plan.buffers.size() && !(plan.buffers[b].key == key)) ++b;
    if (b == plan.buffers.size()) {
      Buffer buffer;
      buffer.key = key;
      buffer.shard_group_size =
          key.expert ? plan.shard_group_size / layout.expert_parallel
                     : plan.shard_group_size;
      plan.buffers.push_back(std::move(buffer));
      members.emplace_back();
    }
    members[b].push_back(i);
  }
  for (size_t b = 0; b < plan.buffers.size(); ++b) {
    Buffer& buffer = plan.buffers[b];
    ZSHARD_RETURN_IF_ERROR(
        LayOutBuffer(model, members[b], plan.bucket_size,
                     BucketPadMultiple(buffer.shard_group_size,
                                       layout.pad_for_high_nccl_busbw),
                     &buffer));
  }
  plan.hash = PlanHash(model, options);
  return plan;
}

}  // namespace zshard::plan
