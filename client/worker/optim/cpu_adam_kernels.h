// The CPU AdamW kernels, one per instruction-set path, each an instantiation
// of the same loop around AdamUpdate (adam_formula.h) on a different lane
// type. Internal to CpuAdam; exposed for its tests.
#pragma once

#include <cstdint>

#include "client/worker/optim/adam_formula.h"
#include "common/plan/model_spec.h"

namespace zshard::optim {

// The code paths of the CPU kernel. kAuto picks the widest one the CPU runs.
enum class CpuAdamPath {
  kAuto = 0,
  kScalar = 1,  // one float at a time (whatever the compiler makes of it)
  kVec128 = 2,  // 4-float vectors, baseline x86-64 (SSE2) or any target
  kAvx2 = 3,    // 8-float vectors, x86-64 with AVX2
  kAvx512 = 4,  // 16-float vectors, x86-64 with AVX-512 F and BW
};

// "auto", "scalar", "vec128", "avx2", "avx512".
const char* CpuAdamPathName(CpuAdamPath path);

// Whether this binary has the path and this CPU (and OS) can run it.
// kAuto is always supported.
bool CpuAdamPathSupported(CpuAdamPath path);

// kAuto -> the best supported path; any other path unchanged.
CpuAdamPath ResolveCpuAdamPath(CpuAdamPath path);

// The operands of one owned slice; element i of the slice is master[i],
// m[i], v[i], grad element i (grad_dtype), param element i (param_dtype).
struct AdamSlice {
  float* master = nullptr;
  float* m = nullptr;
  float* v = nullptr;
  const void* grad = nullptr;
  plan::DType grad_dtype = plan::DType::kBf16;
  void* param = nullptr;
  plan::DType param_dtype = plan::DType::kBf16;
};

// Updates elements [begin, end) of the slice with AdamUpdate(s, decay, ...)
// and writes the new master, rounded to nearest even, to the param.
// Requires a supported, resolved path (not kAuto).
void RunCpuAdamKernel(CpuAdamPath path, const AdamStepParams& s,
                      const AdamSlice& slice, int64_t begin, int64_t end,
                      float decay);

}  // namespace zshard::optim
