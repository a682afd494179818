// BuildPlanIndex and QueryPieces.
#include "server/views/plan_index.h"

#include <algorithm>
#include <utility>

#include "common/status.h"

namespace zshard::server {

absl::StatusOr<PlanIndex> BuildPlanIndex(
    const plan::ModelSpec& model, const plan::Plan& plan,
    const std::vector<plan::Member>& members_by_rank) {
  PlanIndex index;
  ZSHARD_ASSIGN_OR_RETURN(index.ownership,
                          plan::MakeOwnership(model, plan, members_by_rank));
  const int params = static_cast<int>(model.params.size());
  for (int p = 0; p < params; ++p) {
    index.param_by_name.emplace(model.params[p].name, p);
  }
  // Ranges are sorted by param index: one pass finds each param's run.
  index.param_first.assign(params + 1, 0);
  const std::vector<plan::OwnedRange>& ranges = index.ownership.ranges;
  size_t i = 0;
  for (int p = 0; p <= params; ++p) {
    while (i < ranges.size() && ranges[i].param_index < p) ++i;
    index.param_first[p] = i;
  }
  return index;
}

PieceAnswer QueryPieces(const PlanIndex& index, const PieceQuery& query) {
  const std::vector<plan::OwnedRange>& ranges = index.ownership.ranges;
  size_t first = 0;
  size_t last = ranges.size();
  if (query.param >= 0) {
    if (query.param + 1 >= static_cast<int>(index.param_first.size())) {
      return {};
    }
    first = index.param_first[query.param];
    last = index.param_first[query.param + 1];
  }
  PieceAnswer answer;
  const int limit = std::max(1, query.limit);
  for (size_t i = std::max(first, query.start); i < last; ++i) {
    plan::OwnedRange r = ranges[i];
    if (query.rank >= 0 && r.rank != query.rank) continue;
    if (query.bucket >= 0 &&
        (r.bucket != query.bucket || r.buffer != query.buffer)) {
      continue;
    }
    if (query.param >= 0) {
      int64_t lo = std::max(r.begin, query.begin);
      int64_t hi = query.end > 0 ? std::min(r.end, query.end) : r.end;
      if (hi <= lo) continue;
      r.offset_in_bucket += lo - r.begin;
      r.begin = lo;
      r.end = hi;
    }
    if (static_cast<int>(answer.ranges.size()) == limit) {
      answer.next = i;
      break;
    }
    answer.ranges.push_back(r);
  }
  return answer;
}

}  // namespace zshard::server
