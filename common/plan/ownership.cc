// MakeOwnership: every rank's pieces (docs/design.md section 4) turned into
// param-space ranges, tagged with their holder and bucket-relative offset.
#include "common/plan/ownership.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace zshard::plan {

absl::StatusOr<Ownership> MakeOwnership(
    const ModelSpec& model, const Plan& plan,
    const std::vector<Member>& members_by_rank) {
  if (static_cast<int>(members_by_rank.size()) != plan.world) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank assignment has ", members_by_rank.size(),
                     " members but the plan's world is ", plan.world));
  }
  absl::flat_hash_set<std::string> seen;
  for (size_t r = 0; r < members_by_rank.size(); ++r) {
    const std::string& id = members_by_rank[r].id;
    if (id.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("member of rank ", r, " has an empty id"));
    }
    if (!seen.insert(id).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("member '", id, "' holds more than one rank"));
    }
  }
  Ownership out;
  out.world = plan.world;
  out.instances = plan.instances;
  out.expert_parallel = plan.layout.expert_parallel;
  for (const ParamSpec& param : model.params) {
    out.param_names.push_back(param.name);
  }
  out.members = members_by_rank;
  // Pieces are generated per param slot, window by window, instance by
  // instance (the same arithmetic as MakeRankPlan, without building every
  // rank's shards), which yields each param's ranges already sorted.
  const int d = plan.shard_group_size;
  std::vector<std::vector<OwnedRange>> by_param(model.params.size());
  for (size_t b = 0; b < plan.buffers.size(); ++b) {
    const Buffer& buffer = plan.buffers[b];
    const int fanout = d / buffer.shard_group_size;  // E or 1
    for (const ParamSlot& slot : buffer.params) {
      if (slot.param_index < 0 ||
          slot.param_index >= static_cast<int>(model.params.size())) {
        return absl::InvalidArgumentError(
            absl::StrCat("the plan places param ", slot.param_index,
                         " which the model does not have"));
      }
      const Bucket& bucket = buffer.buckets[slot.bucket];
      const int64_t s = (bucket.end - bucket.start) / buffer.shard_group_size;
      const int64_t k0 = (slot.start - bucket.start) / s;
      const int64_t k1 = (slot.end - 1 - bucket.start) / s;
      std::vector<OwnedRange>& out_ranges = by_param[slot.param_index];
      for (int e = 0; e < fanout; ++e) {
        for (int64_t k = k0; k <= k1; ++k) {
          const int64_t window = bucket.start + k * s;
          OwnedRange range;
          range.param_index = slot.param_index;
          range.expert_rank = buffer.key.expert ? e : 0;
          range.begin = std::max(slot.start, window) - slot.start;
          range.end = std::min(slot.end, window + s) - slot.start;
          range.buffer = static_cast<int>(b);
          range.bucket = slot.bucket;
          range.offset_in_bucket = range.begin + slot.start - bucket.start;
          for (int i = 0; i < plan.instances; ++i) {
            range.rank = i * d + static_cast<int>(k) * fanout + e;
            out_ranges.push_back(range);
          }
        }
      }
    }
  }
  size_t total = 0;
  for (const std::vector<OwnedRange>& ranges : by_param) total += ranges.size();
  out.ranges.reserve(total);
  for (std::vector<OwnedRange>& ranges : by_param) {
    out.ranges.insert(out.ranges.end(), ranges.begin(), ranges.end());
  }
  return out;
}

}  // namespace zshard::plan
