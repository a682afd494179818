// An element-by-element checker of a MovePlan for small models: applies the
// moves to the previous ownership and verifies that every new owner ends up
// with exactly its ranges, that every move was needed and came from a real
// holder, and that the byte figures add up.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/plan/moves.h"
#include "common/plan/ownership.h"

namespace zshard::plan::testing {

// Elements held, by (member id, param, expert rank), one flag per element.
using Holdings = std::map<std::tuple<std::string, int, int>, std::vector<char>>;

inline void Mark(std::vector<char>* flags, int64_t begin, int64_t end) {
  if (static_cast<int64_t>(flags->size()) < end) flags->resize(end, 0);
  for (int64_t e = begin; e < end; ++e) (*flags)[e] = 1;
}

inline bool AllSet(const Holdings& h,
                   const std::tuple<std::string, int, int>& k, int64_t begin,
                   int64_t end) {
  auto it = h.find(k);
  if (it == h.end() || static_cast<int64_t>(it->second.size()) < end) {
    return false;
  }
  for (int64_t e = begin; e < end; ++e) {
    if (!it->second[e]) return false;
  }
  return true;
}

inline bool AnySet(const Holdings& h,
                   const std::tuple<std::string, int, int>& k, int64_t begin,
                   int64_t end) {
  auto it = h.find(k);
  if (it == h.end()) return false;
  for (int64_t e = begin;
       e < end && e < static_cast<int64_t>(it->second.size()); ++e) {
    if (it->second[e]) return true;
  }
  return false;
}

// Returns "" when `plan` is exactly right for the inputs, else the first
// problem found.
inline std::string CheckMovePlan(
    const Ownership& previous, const std::vector<std::string>& alive,
    const std::vector<CheckpointFragment>& fragments, const Ownership& next,
    const MovePlan& plan) {
  const absl::flat_hash_set<std::string> live(alive.begin(), alive.end());
  Holdings held, anyone, in_checkpoint;
  for (const OwnedRange& r : previous.ranges) {
    const std::string& id = previous.members[r.rank].id;
    if (!live.contains(id)) continue;
    Mark(&held[{id, r.param_index, r.expert_rank}], r.begin, r.end);
    Mark(&anyone[{"", r.param_index, r.expert_rank}], r.begin, r.end);
  }
  for (const CheckpointFragment& f : fragments) {
    Mark(&in_checkpoint[{"", f.param_index, f.expert_rank}], f.begin, f.end);
  }
  Holdings received;
  int64_t moved = 0, from_checkpoint = 0, same_node = 0;
  for (const Move& m : plan.moves) {
    const std::string where =
        absl::StrCat("move of param ", m.param_index, " [", m.begin, ", ",
                     m.end, ") to ", m.dest_member);
    if (m.end <= m.begin) return where + ": empty";
    if (m.bytes() != 12 * m.elements()) return where + ": bytes";
    moved += m.bytes();
    if (m.source == MoveSource::kMember) {
      bool found = false;
      for (const OwnedRange& r : previous.ranges) {
        if (r.rank == m.source_rank && r.param_index == m.param_index &&
            r.expert_rank == m.expert_rank && r.begin <= m.begin &&
            m.end <= r.end) {
          found = r.buffer == m.source_buffer && r.bucket == m.source_bucket &&
                  r.offset_in_bucket + (m.begin - r.begin) ==
                      m.source_offset_in_bucket &&
                  previous.members[r.rank].id == m.source_member;
        }
      }
      if (!found || !live.contains(m.source_member)) {
        return where + ": source does not hold it";
      }
      const std::string& node = previous.members[m.source_rank].node;
      if (!node.empty() && node == next.members[m.dest_rank].node) {
        same_node += m.bytes();
      }
    } else {
      if (m.fragment < 0 || m.fragment >= static_cast<int>(fragments.size())) {
        return where + ": bad fragment";
      }
      const CheckpointFragment& f = fragments[m.fragment];
      if (f.param_index != m.param_index || f.expert_rank != m.expert_rank ||
          f.begin > m.begin || m.end > f.end) {
        return where + ": fragment does not hold it";
      }
      if (AnySet(anyone, {"", m.param_index, m.expert_rank}, m.begin, m.end)) {
        return where + ": read from a checkpoint although a member holds it";
      }
      from_checkpoint += m.bytes();
    }
    bool dest_ok = false;
    for (const OwnedRange& r : next.ranges) {
      if (r.rank == m.dest_rank && r.param_index == m.param_index &&
          r.expert_rank == m.expert_rank && r.begin <= m.begin &&
          m.end <= r.end) {
        dest_ok = r.buffer == m.dest_buffer && r.bucket == m.dest_bucket &&
                  r.offset_in_bucket + (m.begin - r.begin) ==
                      m.dest_offset_in_bucket &&
                  next.members[r.rank].id == m.dest_member;
      }
    }
    if (!dest_ok) return where + ": not in the destination's new ranges";
    const std::tuple<std::string, int, int> k{m.dest_member, m.param_index,
                                              m.expert_rank};
    if (AnySet(held, k, m.begin, m.end)) return where + ": already held";
    if (AnySet(received, k, m.begin, m.end)) return where + ": received twice";
    Mark(&received[k], m.begin, m.end);
  }
  int64_t needed = 0;
  for (const OwnedRange& r : next.ranges) {
    const std::tuple<std::string, int, int> k{next.members[r.rank].id,
                                              r.param_index, r.expert_rank};
    for (int64_t e = r.begin; e < r.end; ++e) {
      if (AllSet(held, k, e, e + 1)) continue;
      ++needed;
      if (AllSet(received, k, e, e + 1)) continue;
      const std::tuple<std::string, int, int> any{"", r.param_index,
                                                  r.expert_rank};
      if (AllSet(anyone, any, e, e + 1) ||
          AllSet(in_checkpoint, any, e, e + 1)) {
        return absl::StrCat("param ", r.param_index, " element ", e, " of ",
                            std::get<0>(k), " is neither held nor moved");
      }
      bool listed = false;
      for (const LostRange& l : plan.lost) {
        listed |= l.param_index == r.param_index &&
                  l.expert_rank == r.expert_rank && l.begin <= e && e < l.end;
      }
      if (!listed) return absl::StrCat("lost element ", e, " is not listed");
    }
  }
  if (moved != plan.bytes_moved) return "bytes_moved is wrong";
  if (from_checkpoint != plan.bytes_from_checkpoint) {
    return "bytes_from_checkpoint is wrong";
  }
  if (same_node != plan.bytes_same_node) return "bytes_same_node is wrong";
  if (12 * needed != plan.lower_bound_bytes)
    return "lower_bound_bytes is wrong";
  return "";
}

}  // namespace zshard::plan::testing
