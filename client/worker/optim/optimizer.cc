// Optimizer::Update: the argument checks shared by every Adam kernel.
#include "client/worker/optim/optimizer.h"

#include "common/status.h"

namespace zshard::optim {

absl::Status Optimizer::Update(const AdamStepParams& params,
                               absl::Span<const Segment> segments,
                               float* master, float* m, float* v,
                               const void* grad, plan::DType grad_dtype,
                               void* param_out, plan::DType param_dtype,
                               int64_t n) {
  ZSHARD_RETURN_IF_ERROR(
      ValidateUpdateArgs(name(), segments, master, m, v, grad, param_out, n));
  return DoUpdate(params, segments, master, m, v, grad, grad_dtype, param_out,
                  param_dtype, n);
}

}  // namespace zshard::optim
