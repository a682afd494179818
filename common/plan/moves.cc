// PlanMoves: a sweep over param space, one (param, expert rank) key at a
// time. The breakpoints of every old range, new range and fragment of a key
// cut it into elementary segments with a fixed set of holders and owners;
// each owner that does not hold a segment gets it from the best source.
#include "common/plan/moves.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace zshard::plan {
namespace {

using Key = std::pair<int, int>;  // (param_index, expert_rank)

Key KeyOf(const OwnedRange& r) { return {r.param_index, r.expert_rank}; }
Key KeyOf(const CheckpointFragment& f) {
  return {f.param_index, f.expert_rank};
}

// The sweep relies on MakeOwnership's invariants; an ownership rebuilt some
// other way is checked here rather than trusted.
absl::Status ValidateOwnership(const char* which, const Ownership& own) {
  const int num_params = static_cast<int>(own.param_names.size());
  const int world = static_cast<int>(own.members.size());
  for (size_t i = 0; i < own.ranges.size(); ++i) {
    const OwnedRange& r = own.ranges[i];
    const bool sorted =
        i == 0 ||
        std::tie(own.ranges[i - 1].param_index, own.ranges[i - 1].expert_rank,
                 own.ranges[i - 1].begin, own.ranges[i - 1].rank) <
            std::tie(r.param_index, r.expert_rank, r.begin, r.rank);
    if (!sorted || r.param_index < 0 || r.param_index >= num_params ||
        r.rank < 0 || r.rank >= world || r.begin < 0 || r.end <= r.begin) {
      return absl::InvalidArgumentError(
          absl::StrCat("range ", i, " of the ", which,
                       " ownership is malformed or out of order"));
    }
  }
  return absl::OkStatus();
}

absl::Status Validate(const Ownership& previous,
                      const std::vector<CheckpointFragment>& fragments,
                      const Ownership& next) {
  if (absl::Status s = ValidateOwnership("previous", previous); !s.ok()) {
    return s;
  }
  if (absl::Status s = ValidateOwnership("next", next); !s.ok()) return s;
  if (previous.world > 0) {
    if (previous.param_names != next.param_names) {
      return absl::InvalidArgumentError(
          "the previous and next ownerships describe different models");
    }
    if (previous.expert_parallel != next.expert_parallel) {
      return absl::InvalidArgumentError(absl::StrCat(
          "expert_parallel changed from ", previous.expert_parallel, " to ",
          next.expert_parallel, "; expert state cannot be re-addressed"));
    }
  }
  const int num_params = static_cast<int>(next.param_names.size());
  for (size_t i = 0; i < fragments.size(); ++i) {
    const CheckpointFragment& f = fragments[i];
    if (f.param_index < 0 || f.param_index >= num_params || f.expert_rank < 0 ||
        f.expert_rank >= next.expert_parallel || f.begin < 0 ||
        f.end <= f.begin) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint fragment ", i, " (param ", f.param_index,
                       ", expert rank ", f.expert_rank, ", elements [", f.begin,
                       ", ", f.end, ")) is malformed"));
    }
  }
  return absl::OkStatus();
}

// The planner's working state; one instance per PlanMoves call.
class Sweep {
 public:
  Sweep(const Ownership& previous, const std::vector<std::string>& alive,
        const std::vector<CheckpointFragment>& fragments, const Ownership& next)
      : previous_(previous), fragments_(fragments), next_(next) {
    absl::flat_hash_set<std::string> alive_set(alive.begin(), alive.end());
    absl::flat_hash_map<std::string, int> next_rank;
    for (int r = 0; r < static_cast<int>(next.members.size()); ++r) {
      next_rank[next.members[r].id] = r;
    }
    const int old_world = static_cast<int>(previous.members.size());
    old_to_next_.assign(old_world, -1);
    std::vector<bool> live(old_world, false);
    for (int r = 0; r < old_world; ++r) {
      const std::string& id = previous.members[r].id;
      live[r] = alive_set.contains(id);
      auto it = next_rank.find(id);
      if (it != next_rank.end()) old_to_next_[r] = it->second;
    }
    for (int i = 0; i < static_cast<int>(previous.ranges.size()); ++i) {
      const OwnedRange& r = previous.ranges[i];
      if (live[r.rank]) {
        live_old_.push_back(i);
      }
    }
    for (int i = 0; i < static_cast<int>(fragments.size()); ++i) {
      fragment_order_.push_back(i);
    }
    std::sort(fragment_order_.begin(), fragment_order_.end(),
              [&](int a, int b) {
                const CheckpointFragment& x = fragments[a];
                const CheckpointFragment& y = fragments[b];
                return std::tie(x.param_index, x.expert_rank, x.begin, a) <
                       std::tie(y.param_index, y.expert_rank, y.begin, b);
              });
    load_.assign(old_world, 0);
    last_move_.assign(next.ranges.size(), -1);
  }

  MovePlan Run() {
    size_t o = 0, f = 0;
    const size_t n_end = next_.ranges.size();
    for (size_t n = 0; n < n_end;) {
      const Key key = KeyOf(next_.ranges[n]);
      while (o < live_old_.size() &&
             KeyOf(previous_.ranges[live_old_[o]]) < key) {
        ++o;
      }
      while (f < fragment_order_.size() &&
             KeyOf(fragments_[fragment_order_[f]]) < key) {
        ++f;
      }
      const size_t o0 = o, f0 = f, n0 = n;
      while (o < live_old_.size() &&
             KeyOf(previous_.ranges[live_old_[o]]) == key) {
        ++o;
      }
      while (f < fragment_order_.size() &&
             KeyOf(fragments_[fragment_order_[f]]) == key) {
        ++f;
      }
      while (n < n_end && KeyOf(next_.ranges[n]) == key) ++n;
      SweepKey(o0, o, f0, f, n0, n);
    }
    return Finish();
  }

 private:
  // Sweeps one key: live old ranges live_old_[o0, o1), fragments
  // fragment_order_[f0, f1) and next ranges [n0, n1), each sorted by begin.
  void SweepKey(size_t o0, size_t o1, size_t f0, size_t f1, size_t n0,
                size_t n1) {
    std::vector<int64_t> points;
    for (size_t i = o0; i < o1; ++i) {
      const OwnedRange& r = previous_.ranges[live_old_[i]];
      points.push_back(r.begin);
      points.push_back(r.end);
    }
    for (size_t i = f0; i < f1; ++i) {
      points.push_back(fragments_[fragment_order_[i]].begin);
      points.push_back(fragments_[fragment_order_[i]].end);
    }
    for (size_t i = n0; i < n1; ++i) {
      points.push_back(next_.ranges[i].begin);
      points.push_back(next_.ranges[i].end);
    }
    std::sort(points.begin(), points.end());
    points.erase(std::unique(points.begin(), points.end()), points.end());
    std::vector<int> holders, frags, owners;  // active sets
    size_t oi = o0, fi = f0, ni = n0;
    for (size_t p = 0; p + 1 < points.size(); ++p) {
      const int64_t lo = points[p], hi = points[p + 1];
      holders.erase(
          std::remove_if(holders.begin(), holders.end(),
                         [&](int i) { return previous_.ranges[i].end <= lo; }),
          holders.end());
      frags.erase(
          std::remove_if(frags.begin(), frags.end(),
                         [&](int i) { return fragments_[i].end <= lo; }),
          frags.end());
      owners.erase(
          std::remove_if(owners.begin(), owners.end(),
                         [&](int i) { return next_.ranges[i].end <= lo; }),
          owners.end());
      for (; oi < o1 && previous_.ranges[live_old_[oi]].begin <= lo; ++oi) {
        holders.push_back(live_old_[oi]);
      }
      for (; fi < f1 && fragments_[fragment_order_[fi]].begin <= lo; ++fi) {
        frags.push_back(fragment_order_[fi]);
      }
      for (; ni < n1 && next_.ranges[ni].begin <= lo; ++ni) {
        owners.push_back(static_cast<int>(ni));
      }
      bool lost_here = false;
      for (int owner : owners) {
        if (HeldBy(holders, next_.ranges[owner].rank)) continue;
        lower_bound_elements_ += hi - lo;
        const int source = PickSource(holders, frags, next_.ranges[owner]);
        if (source == kNoSource) {
          if (!lost_here) AddLost(next_.ranges[owner], lo, hi);
          lost_here = true;
          continue;
        }
        Emit(owner, source, lo, hi);
      }
    }
  }

  bool HeldBy(const std::vector<int>& holders, int next_rank) const {
    for (int h : holders) {
      if (old_to_next_[previous_.ranges[h].rank] == next_rank) return true;
    }
    return false;
  }

  static bool SameNode(const Member& a, const Member& b) {
    return !a.node.empty() && a.node == b.node;
  }

  // Source ids: >= 0 is an index into previous_.ranges; <= -2 is fragment
  // -(id + 2).
  static constexpr int kNoSource = -1;

  int PickSource(const std::vector<int>& holders, const std::vector<int>& frags,
                 const OwnedRange& dest) {
    int best = kNoSource;
    bool best_remote = false;
    int64_t best_load = 0;
    const std::string* best_id = nullptr;
    for (int h : holders) {
      const int rank = previous_.ranges[h].rank;
      const Member& m = previous_.members[rank];
      const bool remote = !SameNode(m, next_.members[dest.rank]);
      const int64_t load = load_[rank];
      if (best == kNoSource || std::tie(remote, load, m.id) <
                                   std::tie(best_remote, best_load, *best_id)) {
        best = h;
        best_remote = remote;
        best_load = load;
        best_id = &m.id;
      }
    }
    if (best != kNoSource) return best;
    if (frags.empty()) return kNoSource;
    return -2 - *std::min_element(frags.begin(), frags.end());
  }

  void Emit(int owner, int source, int64_t lo, int64_t hi) {
    if (source >= 0) load_[previous_.ranges[source].rank] += hi - lo;
    int& last = last_move_[owner];
    if (last >= 0 && move_source_[last] == source && moves_[last].end == lo) {
      moves_[last].end = hi;
      return;
    }
    const OwnedRange& dest = next_.ranges[owner];
    Move move;
    if (source >= 0) {
      const OwnedRange& src = previous_.ranges[source];
      move.source = MoveSource::kMember;
      move.source_member = previous_.members[src.rank].id;
      move.source_rank = src.rank;
      move.source_buffer = src.buffer;
      move.source_bucket = src.bucket;
      move.source_offset_in_bucket = src.offset_in_bucket + (lo - src.begin);
    } else {
      move.source = MoveSource::kCheckpoint;
      move.fragment = -2 - source;
    }
    move.dest_member = next_.members[dest.rank].id;
    move.dest_rank = dest.rank;
    move.dest_buffer = dest.buffer;
    move.dest_bucket = dest.bucket;
    move.dest_offset_in_bucket = dest.offset_in_bucket + (lo - dest.begin);
    move.param_index = dest.param_index;
    move.expert_rank = dest.expert_rank;
    move.begin = lo;
    move.end = hi;
    last = static_cast<int>(moves_.size());
    moves_.push_back(std::move(move));
    move_source_.push_back(source);
  }

  void AddLost(const OwnedRange& dest, int64_t lo, int64_t hi) {
    if (!lost_.empty()) {
      LostRange& back = lost_.back();
      if (back.param_index == dest.param_index &&
          back.expert_rank == dest.expert_rank && back.end == lo) {
        back.end = hi;
        return;
      }
    }
    lost_.push_back({dest.param_index, dest.expert_rank, lo, hi});
  }

  MovePlan Finish() {
    MovePlan plan;
    // Moves are emitted nearly in this order, so the gather below is close
    // to sequential; sorting indices avoids swapping large Move values.
    using SortKey = std::tuple<int, int, int64_t, int>;
    std::vector<std::pair<SortKey, int>> order;
    order.reserve(moves_.size());
    for (int i = 0; i < static_cast<int>(moves_.size()); ++i) {
      const Move& m = moves_[i];
      order.push_back(
          {{m.param_index, m.expert_rank, m.begin, m.dest_rank}, i});
    }
    std::sort(order.begin(), order.end());
    plan.moves.reserve(moves_.size());
    for (const auto& entry : order) {
      plan.moves.push_back(std::move(moves_[entry.second]));
      plan.moves.back().index = static_cast<int>(plan.moves.size()) - 1;
    }
    for (const Move& m : plan.moves) {
      plan.bytes_moved += m.bytes();
      if (m.source == MoveSource::kCheckpoint) {
        plan.bytes_from_checkpoint += m.bytes();
      } else if (SameNode(previous_.members[m.source_rank],
                          next_.members[m.dest_rank])) {
        plan.bytes_same_node += m.bytes();
      }
    }
    plan.lower_bound_bytes = lower_bound_elements_ * kStateBytesPerElement;
    plan.lost = std::move(lost_);
    return plan;
  }

  const Ownership& previous_;
  const std::vector<CheckpointFragment>& fragments_;
  const Ownership& next_;
  std::vector<int> old_to_next_;     // old rank -> next rank of the same id
  std::vector<int> live_old_;        // indices of ranges of live holders
  std::vector<int> fragment_order_;  // fragment indices by (key, begin)
  std::vector<int64_t> load_;        // elements sent, by old rank
  std::vector<int> last_move_;       // by next range: its latest move
  std::vector<Move> moves_;
  std::vector<int> move_source_;  // source id of each move
  std::vector<LostRange> lost_;
  int64_t lower_bound_elements_ = 0;
};

}  // namespace

absl::StatusOr<MovePlan> PlanMoves(
    const Ownership& previous, const std::vector<std::string>& alive,
    const std::vector<CheckpointFragment>& fragments, const Ownership& next,
    const MoveOptions& options) {
  if (absl::Status s = Validate(previous, fragments, next); !s.ok()) return s;
  MovePlan plan = Sweep(previous, alive, fragments, next).Run();
  if (options.fail_on_loss && !plan.lost.empty()) {
    const LostRange& l = plan.lost.front();
    return absl::FailedPreconditionError(absl::StrCat(
        "param '", next.param_names[l.param_index], "'",
        l.expert_rank > 0 ? absl::StrCat(" (expert rank ", l.expert_rank, ")")
                          : "",
        " elements [", l.begin, ", ", l.end,
        ") have no live holder and no checkpoint fragment (", plan.lost.size(),
        " lost ranges)"));
  }
  return plan;
}

}  // namespace zshard::plan
