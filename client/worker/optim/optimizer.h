// Optimizer: the one interface of the Adam kernels the step engine calls
// (CpuAdam on host memory, CudaAdam on device memory). Update checks its
// arguments once, here, for every implementation; the device layer
// (client/worker/device/device.h, Device::CreateAdam) picks the
// implementation that matches where the buffers live.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "client/worker/optim/adam.h"
#include "common/plan/model_spec.h"

namespace zshard::optim {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // Applies one AdamW step to the n elements of a slice in the memory of
  // the implementation's device: master, m and v are fp32 arrays of n
  // elements, grad holds n elements of grad_dtype, param_out receives n
  // elements of param_dtype (the new master rounded to nearest even; it may
  // alias master when param_dtype is fp32). Segments (see ValidateSegments)
  // give per-piece weight decay; padding and uncovered elements are neither
  // read nor written. May return before the device finished (see
  // Synchronize). InvalidArgument, whose message starts with name(), on a
  // bad table, null pointers with n > 0, or n < 0.
  absl::Status Update(const AdamStepParams& params,
                      absl::Span<const Segment> segments, float* master,
                      float* m, float* v, const void* grad,
                      plan::DType grad_dtype, void* param_out,
                      plan::DType param_dtype, int64_t n);

  // Blocks until every Update issued so far is complete and its results
  // are visible to other streams and to the host. OK at once for kernels
  // whose Update blocks.
  virtual absl::Status Synchronize() = 0;

  // "cpu adam" or "cuda adam".
  virtual absl::string_view name() const = 0;

 protected:
  Optimizer() = default;

 private:
  // Update on arguments already checked.
  virtual absl::Status DoUpdate(const AdamStepParams& params,
                                absl::Span<const Segment> segments,
                                float* master, float* m, float* v,
                                const void* grad, plan::DType grad_dtype,
                                void* param_out, plan::DType param_dtype,
                                int64_t n) = 0;
};

}  // namespace zshard::optim
