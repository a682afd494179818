// The learning-rate schedule of the job spec's optimizer: constant, cosine
// or linear decay after a linear warmup, a pure function of the 1-based
// training step that every rank (and the unsharded reference) evaluates
// alike, so a re-shard never changes the rate of a step.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace zshard::job {

enum class LrScheduleKind { kConstant, kCosine, kLinear };

// "constant", "cosine", "linear".
const char* LrScheduleKindName(LrScheduleKind kind);

// Parses a kind name; InvalidArgument naming the value otherwise.
absl::StatusOr<LrScheduleKind> ParseLrScheduleKind(absl::string_view name);

struct LrSchedule {
  LrScheduleKind kind = LrScheduleKind::kConstant;
  // Steps 1..warmup_steps ramp linearly from lr / warmup_steps to lr.
  // >= 0. Default 0: no warmup.
  int64_t warmup_steps = 0;
  // cosine and linear: the step at which the rate reaches min_lr, >
  // warmup_steps; must be 0 for constant. Default 0.
  int64_t decay_steps = 0;
  // cosine and linear: the rate after decay_steps, in [0, lr]; must be 0
  // for constant. Default 0.
  double min_lr = 0.0;
};

// The schedule's checks against the base rate `lr`; InvalidArgument naming
// the field ("optimizer.lr_schedule.decay_steps ...").
absl::Status ValidateLrSchedule(const LrSchedule& schedule, double lr);

// The rate of 1-based training step `step` (>= 1) for base rate `lr`, with
// Wu = warmup_steps, Dd = decay_steps, M = min_lr:
//   step <= Wu:        lr * step / Wu
//   constant:          lr
//   Wu < step <= Dd:   r = (step - Wu) / (Dd - Wu);
//                      cosine: M + (lr - M) * 0.5 * (1 + cos(pi * r))
//                      linear: M + (lr - M) * (1 - r)
//   step > Dd:         M
// Computed in double. Requires a schedule that passed ValidateLrSchedule.
double LearningRate(const LrSchedule& schedule, double lr, int64_t step);

}  // namespace zshard::job
