// ModelState: the view of a model's parameters and gradients that a
// workload reads and writes, independent of how they are stored (the
// engine's padded, bucketed buffers or the reference's flat arrays).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/plan/plan.h"

namespace zshard::engine {

// A rank's param and grad buffers as another process maps them (the
// trainer's, client/worker/trainer): on the host one shared segment per
// buffer (its fd), on a CUDA device the CUDA IPC handle of each buffer's
// allocation; with where each param starts and the buckets. `generation`
// changes whenever the buffers do.
struct SharedBuffers {
  struct Buffer {
    plan::BufferKey key;
    int64_t numel = 0;
    // (param name, first element in the buffer), in layout order.
    std::vector<std::pair<std::string, int64_t>> param_starts;
    // [start, end) of each bucket, in bucket order.
    std::vector<std::pair<int64_t, int64_t>> buckets;
    int param_fd = -1;  // host: the segments' fds, owned by the buffers
    int grad_fd = -1;
    // CUDA: the 64 bytes of each allocation's cudaIpcMemHandle_t.
    std::string param_ipc;
    std::string grad_ipc;
  };
  int64_t generation = 0;
  // The CUDA device ordinal of the buffers; -1: host memory.
  int cuda_device = -1;
  std::vector<Buffer> buffers;
};

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

  // The buffers as another process maps them; null (the default) when they
  // are private memory.
  virtual const SharedBuffers* shared_buffers() const { return nullptr; }
};

}  // namespace zshard::engine
