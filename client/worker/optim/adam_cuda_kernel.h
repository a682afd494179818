// The launcher of the CUDA AdamW kernel, in plain C++ types so that only the
// .cu file sees CUDA headers. Internal to CudaAdam (adam_cuda.h).
#pragma once

#include <cstdint>

#include "client/worker/optim/adam_formula.h"

namespace zshard::optim::cuda_internal {

// Element formats, numbered like zshard::plan::DType.
enum class ElemType : int { kBf16 = 0, kFp16 = 1, kFp32 = 2 };

// Up to this many runs go in one launch (kernel arguments stay small).
constexpr int kMaxLaunchRuns = 128;

// Runs of elements [begin[k], end[k]) with decay factor decay[k], sorted and
// disjoint; elements between runs are skipped.
struct LaunchRuns {
  int count = 0;
  int64_t begin[kMaxLaunchRuns];
  int64_t end[kMaxLaunchRuns];
  float decay[kMaxLaunchRuns];
};

struct LaunchArgs {
  AdamStepParams step;
  float* master = nullptr;  // device pointers
  float* m = nullptr;
  float* v = nullptr;
  const void* grad = nullptr;
  ElemType grad_type = ElemType::kBf16;
  void* param = nullptr;
  ElemType param_type = ElemType::kBf16;
};

// Enqueues one flat kernel over the runs on `stream` (a cudaStream_t; null
// is the default stream), with at most max_blocks blocks of
// threads_per_block threads. Returns the cudaError_t of the launch (0 ok).
int LaunchAdamKernel(const LaunchArgs& args, const LaunchRuns& runs,
                     int threads_per_block, int max_blocks, void* stream);

}  // namespace zshard::optim::cuda_internal
