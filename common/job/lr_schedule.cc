// LearningRate and the schedule's checks.
#include "common/job/lr_schedule.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace zshard::job {

const char* LrScheduleKindName(LrScheduleKind kind) {
  switch (kind) {
    case LrScheduleKind::kConstant:
      return "constant";
    case LrScheduleKind::kCosine:
      return "cosine";
    case LrScheduleKind::kLinear:
      return "linear";
  }
  return "invalid";
}

absl::StatusOr<LrScheduleKind> ParseLrScheduleKind(absl::string_view name) {
  for (LrScheduleKind kind :
       {LrScheduleKind::kConstant, LrScheduleKind::kCosine,
        LrScheduleKind::kLinear}) {
    if (name == LrScheduleKindName(kind)) return kind;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("optimizer.lr_schedule.kind must be constant, cosine or "
                   "linear, not '",
                   name, "'"));
}

absl::Status ValidateLrSchedule(const LrSchedule& s, double lr) {
  if (s.warmup_steps < 0) {
    return absl::InvalidArgumentError(
        "optimizer.lr_schedule.warmup_steps must be >= 0");
  }
  if (s.kind == LrScheduleKind::kConstant) {
    if (s.decay_steps != 0 || s.min_lr != 0.0) {
      return absl::InvalidArgumentError(
          "optimizer.lr_schedule: decay_steps and min_lr apply to cosine and "
          "linear only");
    }
    return absl::OkStatus();
  }
  if (s.decay_steps <= s.warmup_steps) {
    return absl::InvalidArgumentError(absl::StrCat(
        "optimizer.lr_schedule.decay_steps (", s.decay_steps,
        ") must be greater than warmup_steps (", s.warmup_steps, ")"));
  }
  if (!(s.min_lr >= 0.0 && s.min_lr <= lr)) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer.lr_schedule.min_lr (", s.min_lr,
                     ") must be in [0, optimizer.lr = ", lr, "]"));
  }
  return absl::OkStatus();
}

double LearningRate(const LrSchedule& s, double lr, int64_t step) {
  if (step <= s.warmup_steps) {
    return lr * static_cast<double>(step) / static_cast<double>(s.warmup_steps);
  }
  if (s.kind == LrScheduleKind::kConstant) return lr;
  if (step > s.decay_steps) return s.min_lr;
  const double r = static_cast<double>(step - s.warmup_steps) /
                   static_cast<double>(s.decay_steps - s.warmup_steps);
  if (s.kind == LrScheduleKind::kCosine) {
    return s.min_lr + (lr - s.min_lr) * 0.5 * (1.0 + std::cos(M_PI * r));
  }
  return s.min_lr + (lr - s.min_lr) * (1.0 - r);
}

}  // namespace zshard::job
