// ModelState: the view of a model's parameters and gradients that a
// workload reads and writes, independent of how they are stored (the
// engine's padded, bucketed buffers or the reference's flat arrays).
#pragma once

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace zshard::engine {

// Params and grads addressed by param index (registration order) and element
// index in the flattened param. Implementations are not thread-safe.
class ModelState {
 public:
  virtual ~ModelState() = default;

  // The current value of every element of param `p` as fp32 (exact: the
  // stored dtype widened). Requires 0 <= p < number of params. Fails only
  // when the storage cannot be read (a device copy's error).
  virtual absl::StatusOr<std::vector<float>> ReadParam(int p) const = 0;

  // Stores this rank's gradient of param `p` (numel values, fp32), rounded
  // once to the grad dtype. Requires values.size() == numel of p. Fails
  // only when the storage cannot be written (a device copy's error).
  virtual absl::Status WriteGrad(int p, absl::Span<const float> values) = 0;
};

}  // namespace zshard::engine
