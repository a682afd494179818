// ParamSpace: the index of owned pieces and the copies through it.
#include "client/worker/reshard/param_space.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "client/worker/engine/engine_groups.h"

namespace zshard::reshard {
namespace {

using engine::StateArray;

// The state arrays a move carries, in the order of CopyOut / CopyIn's
// pointers.
constexpr StateArray kStateArrays[] = {StateArray::kMaster, StateArray::kExpAvg,
                                       StateArray::kExpAvgSq};

// Calls fn(slice, from, to) for the part [from, to) of every slice that
// lies inside [begin, end).
template <typename Fn>
void ForEachPart(absl::Span<const Slice> slices, int64_t begin, int64_t end,
                 Fn fn) {
  for (const Slice& s : slices) {
    const int64_t from = std::max(begin, s.begin);
    const int64_t to = std::min(end, s.end);
    if (from < to) fn(s, from, to);
  }
}

}  // namespace

ParamSpace::ParamSpace(const engine::EngineBuffers& buffers)
    : by_param_(buffers.model().params.size()) {
  for (int p = 0; p < num_params(); ++p) {
    expert_rank_.push_back(engine::StateExpertRank(
        buffers.model(), buffers.plan(), buffers.rank_plan().rank, p));
  }
  const std::vector<engine::WindowState>& windows = buffers.windows();
  for (size_t w = 0; w < windows.size(); ++w) {
    for (const plan::Piece& piece : windows[w].pieces) {
      if (piece.end <= piece.start) continue;
      Slice s;
      s.window = static_cast<int>(w);
      s.offset = piece.start - windows[w].start;
      s.begin = piece.param_start;
      s.end = piece.param_end;
      by_param_[piece.param_index].push_back(s);
    }
  }
  for (std::vector<Slice>& v : by_param_) {
    std::sort(v.begin(), v.end(),
              [](const Slice& a, const Slice& b) { return a.begin < b.begin; });
  }
}

absl::Span<const Slice> ParamSpace::slices(int param_index) const {
  if (param_index < 0 || param_index >= num_params()) return {};
  return by_param_[param_index];
}

absl::StatusOr<std::vector<Slice>> ParamSpace::Find(int param_index,
                                                    int expert_rank,
                                                    int64_t begin,
                                                    int64_t end) const {
  auto missing = [&](int64_t from) {
    return absl::InvalidArgumentError(absl::StrCat(
        "param ", param_index, " (expert rank ", expert_rank, ") elements [",
        from, ", ", end, ") are not held by these buffers"));
  };
  if (param_index < 0 || param_index >= num_params() ||
      expert_rank != expert_rank_[param_index] || begin < 0 || end <= begin) {
    return missing(begin);
  }
  std::vector<Slice> out;
  int64_t cursor = begin;
  for (const Slice& s : by_param_[param_index]) {
    if (s.end <= cursor) continue;
    if (s.begin > cursor) break;
    Slice part = s;
    part.offset += cursor - s.begin;
    part.begin = cursor;
    part.end = std::min(end, s.end);
    out.push_back(part);
    cursor = part.end;
    if (cursor == end) return out;
  }
  return missing(cursor);
}

absl::Status CopyOut(const engine::EngineBuffers& buffers,
                     absl::Span<const Slice> slices, int64_t begin, int64_t end,
                     float* master, float* exp_avg, float* exp_avg_sq) {
  absl::Status status;
  float* const out[] = {master, exp_avg, exp_avg_sq};
  ForEachPart(
      slices, begin, end, [&](const Slice& s, int64_t from, int64_t to) {
        for (int k = 0; k < 3 && status.ok(); ++k) {
          status = buffers.ReadState(kStateArrays[k], s.window,
                                     s.offset + (from - s.begin), to - from,
                                     out[k] + (from - begin));
        }
      });
  return status;
}

absl::Status CopyIn(engine::EngineBuffers& buffers,
                    absl::Span<const Slice> slices, int64_t begin, int64_t end,
                    const float* master, const float* exp_avg,
                    const float* exp_avg_sq) {
  absl::Status status;
  const float* const in[] = {master, exp_avg, exp_avg_sq};
  ForEachPart(
      slices, begin, end, [&](const Slice& s, int64_t from, int64_t to) {
        for (int k = 0; k < 3 && status.ok(); ++k) {
          status = buffers.WriteState(kStateArrays[k], s.window,
                                      s.offset + (from - s.begin), to - from,
                                      in[k] + (from - begin));
        }
      });
  return status;
}

}  // namespace zshard::reshard
