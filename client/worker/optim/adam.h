// The AdamW vocabulary shared by the CPU and CUDA kernels: hyperparameters,
// the per-step scalars derived from them, the gradient scale (batch divisor
// and clipping), and the segment table describing the pieces of an owned
// slice.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "client/worker/optim/adam_formula.h"

namespace zshard::optim {

// AdamW hyperparameters (torch.optim.AdamW's names and defaults, except the
// weight decay, which defaults to 0 here).
struct AdamHyper {
  double lr = 1e-3;           // learning rate, >= 0
  double beta1 = 0.9;         // in [0, 1)
  double beta2 = 0.999;       // in [0, 1)
  double eps = 1e-8;          // > 0, added outside the sqrt
  double weight_decay = 0.0;  // decoupled, >= 0
};

// Derives the per-step scalars for 1-based step `step`, computing the bias
// corrections in double. `grad_scale` multiplies every raw gradient element
// (see GradScale). InvalidArgument naming the field when a hyperparameter,
// the step or the scale is out of range.
absl::StatusOr<AdamStepParams> MakeAdamStepParams(const AdamHyper& hyper,
                                                  int64_t step,
                                                  double grad_scale);

// The single factor applied to summed gradients before Adam: divide by the
// global batch `divisor` (> 0), then clip by the global L2 norm when
// `clip_norm` > 0, with `total_norm` the norm of the divided gradients:
//   (1 / divisor) * min(1, clip_norm / (total_norm + 1e-6)).
// Returns 0 for a non-positive divisor (callers validate it upstream).
double GradScale(double divisor, double total_norm, double clip_norm);

// One piece of an owned slice, in element indices relative to the slice
// start: [begin, end). Padding is never read or written.
struct Segment {
  int64_t begin = 0;
  int64_t end = 0;
  bool no_weight_decay = false;  // AdamW skips the decoupled weight decay
  bool padding = false;          // belongs to no parameter: left untouched
};

// Checks a segment table for a slice of n elements: segments sorted by
// begin, non-overlapping, begin <= end, inside [0, n). Elements covered by
// no segment are left untouched, like padding. An empty table stands for one
// segment [0, n) with weight decay. InvalidArgument naming the segment.
absl::Status ValidateSegments(absl::Span<const Segment> segments, int64_t n);

// The argument checks of an Adam launcher's Update (CpuAdam, CudaAdam), for
// a slice of n elements: n >= 0, no null array when n > 0, and a valid
// segment table. InvalidArgument whose message starts with `kernel` ("cpu
// adam").
absl::Status ValidateUpdateArgs(absl::string_view kernel,
                                absl::Span<const Segment> segments,
                                const float* master, const float* m,
                                const float* v, const void* grad,
                                const void* param_out, int64_t n);

}  // namespace zshard::optim
