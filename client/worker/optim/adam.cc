// Derivation of the per-step AdamW scalars, the gradient scale and the
// argument checks shared by the Adam launchers.
#include "client/worker/optim/adam.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace zshard::optim {

absl::StatusOr<AdamStepParams> MakeAdamStepParams(const AdamHyper& hyper,
                                                  int64_t step,
                                                  double grad_scale) {
  if (step < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("adam step ", step, " is not >= 1"));
  }
  if (!(hyper.lr >= 0) || !std::isfinite(hyper.lr)) {
    return absl::InvalidArgumentError(
        absl::StrCat("adam lr ", hyper.lr, " is not a finite value >= 0"));
  }
  if (!(hyper.beta1 >= 0 && hyper.beta1 < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("adam beta1 ", hyper.beta1, " is not in [0, 1)"));
  }
  if (!(hyper.beta2 >= 0 && hyper.beta2 < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("adam beta2 ", hyper.beta2, " is not in [0, 1)"));
  }
  if (!(hyper.eps > 0) || !std::isfinite(hyper.eps)) {
    return absl::InvalidArgumentError(
        absl::StrCat("adam eps ", hyper.eps, " is not a finite value > 0"));
  }
  if (!(hyper.weight_decay >= 0) || !std::isfinite(hyper.weight_decay)) {
    return absl::InvalidArgumentError(
        absl::StrCat("adam weight_decay ", hyper.weight_decay,
                     " is not a finite value >= 0"));
  }
  if (!std::isfinite(grad_scale)) {
    return absl::InvalidArgumentError(
        absl::StrCat("adam grad_scale ", grad_scale, " is not finite"));
  }
  const double t = static_cast<double>(step);
  const double bias_correction1 = 1.0 - std::pow(hyper.beta1, t);
  const double bias_correction2 = 1.0 - std::pow(hyper.beta2, t);
  AdamStepParams s;
  s.step = step;
  s.grad_scale = static_cast<float>(grad_scale);
  s.beta1 = static_cast<float>(hyper.beta1);
  s.one_minus_beta1 = static_cast<float>(1.0 - hyper.beta1);
  s.beta2 = static_cast<float>(hyper.beta2);
  s.one_minus_beta2 = static_cast<float>(1.0 - hyper.beta2);
  s.step_size = static_cast<float>(hyper.lr / bias_correction1);
  s.bias_correction2_sqrt = static_cast<float>(std::sqrt(bias_correction2));
  s.eps = static_cast<float>(hyper.eps);
  s.decay = static_cast<float>(1.0 - hyper.lr * hyper.weight_decay);
  return s;
}

double GradScale(double divisor, double total_norm, double clip_norm) {
  if (!(divisor > 0)) return 0.0;
  double scale = 1.0 / divisor;
  if (clip_norm > 0) {
    scale *= std::min(1.0, clip_norm / (total_norm + 1e-6));
  }
  return scale;
}

absl::Status ValidateSegments(absl::Span<const Segment> segments, int64_t n) {
  int64_t prev_end = 0;
  for (size_t i = 0; i < segments.size(); ++i) {
    const Segment& seg = segments[i];
    if (seg.begin < prev_end || seg.end < seg.begin || seg.end > n) {
      return absl::InvalidArgumentError(
          absl::StrCat("segment ", i, " [", seg.begin, ", ", seg.end,
                       ") is unsorted, overlapping or outside the slice of ", n,
                       " elements"));
    }
    prev_end = seg.end;
  }
  return absl::OkStatus();
}

absl::Status ValidateUpdateArgs(absl::string_view kernel,
                                absl::Span<const Segment> segments,
                                const float* master, const float* m,
                                const float* v, const void* grad,
                                const void* param_out, int64_t n) {
  if (n < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(kernel, " slice length ", n, " is negative"));
  }
  if (n > 0 && (master == nullptr || m == nullptr || v == nullptr ||
                grad == nullptr || param_out == nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat(
        kernel, " slice has a null master, m, v, grad or param pointer"));
  }
  return ValidateSegments(segments, n);
}

}  // namespace zshard::optim
