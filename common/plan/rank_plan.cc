// Per-rank ownership (docs/design.md section 4): each rank's shard of every
// bucket and the param pieces inside it, plus the rank groups of section 2.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/plan/plan.h"

namespace zshard::plan {
namespace {

// Index of the first param slot of `bucket` in buffer order. Slots are
// sorted by start, hence by bucket.
size_t FirstSlotOfBucket(const Buffer& buffer, int bucket) {
  auto it = std::lower_bound(
      buffer.params.begin(), buffer.params.end(), bucket,
      [](const ParamSlot& slot, int b) { return slot.bucket < b; });
  return static_cast<size_t>(it - buffer.params.begin());
}

// Fills `shard` ([start, end) already set) with the pieces of the params of
// its bucket that overlap it.
void AddPieces(const Buffer& buffer, Shard* shard) {
  size_t first = FirstSlotOfBucket(buffer, shard->bucket);
  // Skip, by binary search, the bucket's params that end before the window.
  auto begin = buffer.params.begin() + static_cast<std::ptrdiff_t>(first);
  auto it = std::partition_point(
      begin, buffer.params.end(), [&](const ParamSlot& slot) {
        return slot.bucket == shard->bucket && slot.end <= shard->start;
      });
  for (; it != buffer.params.end() && it->bucket == shard->bucket &&
         it->start < shard->end;
       ++it) {
    Piece piece;
    piece.param_index = it->param_index;
    piece.start = std::max(it->start, shard->start);
    piece.end = std::min(it->end, shard->end);
    if (piece.end <= piece.start) continue;
    piece.param_start = piece.start - it->start;
    piece.param_end = piece.end - it->start;
    shard->pieces.push_back(piece);
  }
}

}  // namespace

absl::Status CheckRank(const Plan& plan, int rank) {
  if (rank < 0 || rank >= plan.world) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, " is out of range [0, ", plan.world, ")"));
  }
  return absl::OkStatus();
}

RankPlan MakeRankPlan(const ModelSpec& model, const Plan& plan, int rank) {
  (void)model;  // the plan's slots already carry everything pieces need
  RankPlan out;
  out.rank = rank;
  if (!CheckRank(plan, rank).ok()) return out;
  const int d = plan.shard_group_size;
  out.instance = rank / d;
  out.shard_rank = rank % d;
  for (size_t b = 0; b < plan.buffers.size(); ++b) {
    const Buffer& buffer = plan.buffers[b];
    const int group = buffer.shard_group_size;
    // Expert-parallel rank varies fastest inside the instance.
    const int k =
        buffer.key.expert ? out.shard_rank / (d / group) : out.shard_rank;
    for (size_t c = 0; c < buffer.buckets.size(); ++c) {
      const Bucket& bucket = buffer.buckets[c];
      const int64_t s = (bucket.end - bucket.start) / group;
      Shard shard;
      shard.buffer = static_cast<int>(b);
      shard.bucket = static_cast<int>(c);
      shard.start = bucket.start + k * s;
      shard.end = shard.start + s;
      AddPieces(buffer, &shard);
      out.shards.push_back(std::move(shard));
    }
  }
  return out;
}

std::vector<int> IntraInstanceGroup(const Plan& plan, int rank) {
  std::vector<int> group;
  if (!CheckRank(plan, rank).ok()) return group;
  const int d = plan.shard_group_size;
  const int first = rank / d * d;
  for (int r = first; r < first + d; ++r) group.push_back(r);
  return group;
}

std::vector<int> InterInstanceGroup(const Plan& plan, int rank) {
  std::vector<int> group;
  if (!CheckRank(plan, rank).ok()) return group;
  const int d = plan.shard_group_size;
  for (int r = rank % d; r < plan.world; r += d) group.push_back(r);
  return group;
}

}  // namespace zshard::plan
