// Ownership of optimizer state (fp32 master, m and v, which always move
// together) in one epoch: which member holds which element range of which
// parameter, derived from a Plan and its rank assignment. State is addressed
// in param space (param index, element range of the flattened param), which
// survives any change of world, instance count or bucket size and matches
// the checkpoint fragments of docs/design.md section 7.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/plan/model_spec.h"
#include "common/plan/plan.h"

namespace zshard::plan {

// Bytes of optimizer state per parameter element: fp32 master, m and v.
inline constexpr int64_t kStateBytesPerElement = 12;

// A member of the world: its stable id (worker id or name) and its node
// label (empty when unknown; an empty label matches no other label).
struct Member {
  std::string id;
  std::string node;
};

// One contiguous range of one parameter's state held by one rank.
struct OwnedRange {
  int param_index = 0;  // index into ModelSpec::params
  // Expert-parallel rank (shard_rank % E) for params of expert buffers, 0
  // for dense params: expert state of different expert-parallel ranks is
  // kept apart and never used as a source for one another.
  int expert_rank = 0;
  int64_t begin = 0;  // element range [begin, end) of the flattened param
  int64_t end = 0;
  int rank = 0;  // the holder's rank; Ownership::members[rank] is the holder
  // Where `begin` lives in the holder's buffers: buffer index, bucket index
  // and offset from the bucket's start (independent of D).
  int buffer = 0;
  int bucket = 0;
  int64_t offset_in_bucket = 0;

  int64_t size() const { return end - begin; }
};

// Who holds what in one epoch. Every instance holds a full replica, so each
// element is held by one rank per instance (E ranks per instance for expert
// params with expert_parallel = E, one per expert-parallel rank).
struct Ownership {
  int world = 0;
  int instances = 0;
  int expert_parallel = 1;
  std::vector<std::string> param_names;  // ModelSpec::params' names
  std::vector<Member> members;           // by rank, size == world
  // Sorted by (param_index, expert_rank, begin, rank); never empty ranges.
  std::vector<OwnedRange> ranges;
};

// Derives the ownership of `plan` (computed from `model`) with
// `members_by_rank[r]` holding rank r. Ranges are generated with the
// arithmetic of MakeRankPlan (tests check they agree). InvalidArgument when
// the member count differs from plan.world, an id is empty or repeated, or
// the plan was not computed from `model`.
absl::StatusOr<Ownership> MakeOwnership(
    const ModelSpec& model, const Plan& plan,
    const std::vector<Member>& members_by_rank);

}  // namespace zshard::plan
