// The launchers of the CUDA device's kernels (cast, sum of squares,
// scale), in plain C++ types so that only the .cu file sees CUDA headers.
// Internal to the CUDA device (cuda_device.cc). Each returns the
// cudaError_t of its launch (0 ok) and only enqueues on `stream` (a
// cudaStream_t).
#pragma once

#include <cstdint>

namespace zshard::device::cuda_kernels {

// Element formats, numbered like zshard::plan::DType.
enum class Elem : int { kBf16 = 0, kFp16 = 1, kFp32 = 2 };

// Elements per fp32 partial sum (the SumSquares order of device.h).
constexpr int64_t kSumBlock = 1024;

// Up to this many segments go in one launch (kernel arguments stay small).
constexpr int kMaxSegments = 128;

// Segments [begin[k], end[k]) of a grad slice; the fp32 partial of their
// j-th block of kSumBlock elements goes to partials[first_block[k] + j].
struct SumSegments {
  int count = 0;
  int64_t begin[kMaxSegments];
  int64_t end[kMaxSegments];
  int64_t first_block[kMaxSegments];
};

// param[i] = master[i] rounded to `type` for i in [begin, end).
int LaunchCast(const float* master, void* param, Elem type, int64_t begin,
               int64_t end, void* stream);

// The fp32 partial of every block of every segment.
int LaunchBlockPartials(const void* grad, Elem type, const SumSegments& segs,
                        float* partials, void* stream);

// Per segment k, in block order: sum_squares[k] (double) and nonfinite[k],
// from the partials (a non-finite partial's block summed again element by
// element).
int LaunchSegmentSums(const void* grad, Elem type, const SumSegments& segs,
                      const float* partials, double* sum_squares,
                      int64_t* nonfinite, void* stream);

// data[i] = data[i] * factor, rounded back to `type`, for i in [0, n).
int LaunchScale(void* data, Elem type, int64_t n, float factor, void* stream);

}  // namespace zshard::device::cuda_kernels
