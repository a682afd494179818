// ParamSpace: where a param-space range of optimizer state (param index,
// element range of the flattened param) lives in one rank's EngineBuffers
// (owned window and offset in it), from the plan's pieces; and copies of
// master, m and v between such a range and flat host arrays.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "client/worker/engine/engine_buffers.h"

namespace zshard::reshard {

// Param elements [begin, end) held at window `window`, element `offset` of
// the window.
struct Slice {
  int window = 0;
  int64_t offset = 0;
  int64_t begin = 0;
  int64_t end = 0;
};

// An index of the owned pieces of one EngineBuffers. Holds no pointer to
// them; immutable after construction, so thread-safe.
class ParamSpace {
 public:
  explicit ParamSpace(const engine::EngineBuffers& buffers);

  // The slices, in param-element order, that together hold [begin, end) of
  // param `param_index`, clipped to that range. InvalidArgument naming the
  // range when any element of it is not owned, or when `expert_rank` is not
  // expert_rank(param_index) (another expert-parallel rank's state).
  absl::StatusOr<std::vector<Slice>> Find(int param_index, int expert_rank,
                                          int64_t begin, int64_t end) const;

  // The expert-parallel rank whose state of param `param_index` these
  // buffers hold: the rank's expert-parallel rank for an expert param, 0
  // for a dense one (and for an index out of range).
  int expert_rank(int param_index) const {
    return param_index >= 0 && param_index < num_params()
               ? expert_rank_[param_index]
               : 0;
  }

  // Every owned slice of param `param_index`, in element order (none for
  // an index out of range).
  absl::Span<const Slice> slices(int param_index) const;

  int num_params() const { return static_cast<int>(by_param_.size()); }

 private:
  std::vector<std::vector<Slice>> by_param_;
  std::vector<int> expert_rank_;
};

// Copies the state of param elements [begin, end), held by `slices` (as
// returned by Find for a range containing it), into the three host arrays
// of end - begin floats each (through the buffers' device). The device's
// status on failure.
absl::Status CopyOut(const engine::EngineBuffers& buffers,
                     absl::Span<const Slice> slices, int64_t begin, int64_t end,
                     float* master, float* exp_avg, float* exp_avg_sq);

// The reverse: writes the three host arrays into [begin, end) of `buffers`.
absl::Status CopyIn(engine::EngineBuffers& buffers,
                    absl::Span<const Slice> slices, int64_t begin, int64_t end,
                    const float* master, const float* exp_avg,
                    const float* exp_avg_sq);

}  // namespace zshard::reshard
