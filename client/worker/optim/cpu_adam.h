// CpuAdam: the AdamW step of an owned slice on the CPU, split between the
// threads of a persistent pool, each running the vectorised kernel of the
// path chosen at creation.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "client/worker/optim/adam.h"
#include "client/worker/optim/cpu_adam_kernels.h"
#include "client/worker/optim/optimizer.h"
#include "client/worker/optim/thread_pool.h"
#include "common/plan/model_spec.h"

namespace zshard::optim {

struct CpuAdamOptions {
  // Threads updating one slice (the caller is one of them). 0 (default):
  // std::thread::hardware_concurrency().
  int num_threads = 0;
  // Code path. kAuto (default): the widest SIMD path this CPU runs. A path
  // the CPU cannot run makes Create() fail.
  CpuAdamPath path = CpuAdamPath::kAuto;
  // Fewest elements worth giving a thread of their own (default 32768):
  // small slices use fewer threads.
  int64_t min_elements_per_thread = 32768;
  // Elements a thread claims at a time (default 65536, rounded up to a
  // multiple of 64): threads take chunks until none is left, so a preempted
  // thread holds back at most one chunk.
  int64_t chunk_elements = 65536;
};

// The Optimizer over host memory. Update (optimizer.h) blocks until the
// slice is done. Thread-safe: concurrent Update() calls are serialised on
// the pool.
class CpuAdam final : public Optimizer {
 public:
  // InvalidArgument for negative counts or a path this CPU cannot run.
  static absl::StatusOr<std::unique_ptr<CpuAdam>> Create(
      const CpuAdamOptions& options);

  // Update blocks: nothing is left to wait for.
  absl::Status Synchronize() override { return absl::OkStatus(); }
  absl::string_view name() const override { return "cpu adam"; }

  CpuAdamPath path() const { return path_; }
  int num_threads() const { return pool_.num_threads(); }

 private:
  CpuAdam(const CpuAdamOptions& options, CpuAdamPath path, int threads);
  absl::Status DoUpdate(const AdamStepParams& params,
                        absl::Span<const Segment> segments, float* master,
                        float* m, float* v, const void* grad,
                        plan::DType grad_dtype, void* param_out,
                        plan::DType param_dtype, int64_t n) override;

  const CpuAdamOptions options_;
  const CpuAdamPath path_;
  const int64_t chunk_elements_;
  ThreadPool pool_;
};

}  // namespace zshard::optim
