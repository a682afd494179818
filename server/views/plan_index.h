// The committed plan's ownership indexed by parameter, for the dashboard's
// plan queries ("who owns h.3.mlp.w1 elements 0..4096?"): a name lookup and
// a contiguous run of owned ranges per parameter, so a query costs the
// size of its answer, not of the plan.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "common/plan/model_spec.h"
#include "common/plan/ownership.h"
#include "common/plan/plan.h"

namespace zshard::server {

struct PlanIndex {
  plan::Ownership ownership;
  std::unordered_map<std::string, int> param_by_name;
  // Ranges of param p are ownership.ranges[param_first[p], param_first[p+1]).
  std::vector<size_t> param_first;
};

// Indexes `plan` (made from `model`) with `members_by_rank[r]` holding rank
// r. Errors from plan::MakeOwnership.
absl::StatusOr<PlanIndex> BuildPlanIndex(
    const plan::ModelSpec& model, const plan::Plan& plan,
    const std::vector<plan::Member>& members_by_rank);

struct PieceQuery {
  int param = -1;     // param index; -1: every param
  int64_t begin = 0;  // with param: element range [begin, end);
  int64_t end = 0;    // end 0 means to the param's end
  int rank = -1;      // -1: every rank
  int buffer = -1;    // with bucket: only that bucket of that buffer
  int bucket = -1;    // -1: every bucket
  size_t start = 0;   // resume position (PieceAnswer::next)
  int limit = 1000;   // ranges per answer, >= 1
};

struct PieceAnswer {
  // Owned ranges clipped to the query's element range, in index order.
  std::vector<plan::OwnedRange> ranges;
  size_t next = 0;  // 0: no more; else pass as PieceQuery::start
};

PieceAnswer QueryPieces(const PlanIndex& index, const PieceQuery& query);

}  // namespace zshard::server
