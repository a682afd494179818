// The CUDA device's kernels. Built with --fmad=false and IEEE division and
// square root, so that every product and sum rounds as on the host
// (host_device.cc, -ffp-contract=off); the conversions are float_bits.h's,
// the ones Adam uses.
#include <cuda_runtime.h>

#include "client/worker/device/cuda_kernels.h"
#include "client/worker/optim/float_bits.h"

namespace zshard::device::cuda_kernels {
namespace {

constexpr int kThreads = 256;

template <Elem kT>
__device__ __forceinline__ float Load(const void* base, int64_t i) {
  if constexpr (kT == Elem::kFp32) {
    return static_cast<const float*>(base)[i];
  } else if constexpr (kT == Elem::kBf16) {
    return optim::Bf16BitsToFloat<float>(static_cast<const uint16_t*>(base)[i]);
  } else {
    return optim::HalfBitsToFloat(static_cast<const uint16_t*>(base)[i]);
  }
}

template <Elem kT>
__device__ __forceinline__ void Store(void* base, int64_t i, float x) {
  if constexpr (kT == Elem::kFp32) {
    static_cast<float*>(base)[i] = x;
  } else if constexpr (kT == Elem::kBf16) {
    static_cast<uint16_t*>(base)[i] =
        static_cast<uint16_t>(optim::FloatToBf16Bits<float>(x));
  } else {
    static_cast<uint16_t*>(base)[i] =
        static_cast<uint16_t>(optim::FloatToHalfBits(x));
  }
}

int Blocks(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 65535 * 16 ? b : 65535 * 16);
}

template <Elem kT>
__global__ void CastKernel(const float* master, void* param, int64_t begin,
                           int64_t end) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i =
           begin + static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < end; i += stride) {
    Store<kT>(param, i, master[i]);
  }
}

template <Elem kT>
__global__ void ScaleKernel(void* data, int64_t n, float factor) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < n; i += stride) {
    Store<kT>(data, i, optim::ScaleKeepingNan(Load<kT>(data, i), factor));
  }
}

// One thread per block of kSumBlock elements: the fp32 partial in element
// order (no fused multiply-add: g * g rounds, then the sum).
template <Elem kT>
__global__ void PartialsKernel(const void* grad, SumSegments segs,
                               int64_t total_blocks, float* partials) {
  const int64_t b = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (b >= total_blocks) return;
  int k = 0;  // the last segment whose first block is <= b
  int lo = 0, hi = segs.count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (segs.first_block[mid] <= b) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  k = lo;
  const int64_t start = segs.begin[k] + (b - segs.first_block[k]) * kSumBlock;
  const int64_t stop =
      start + kSumBlock < segs.end[k] ? start + kSumBlock : segs.end[k];
  float partial = 0;
  for (int64_t j = start; j < stop; ++j) {
    const float g = Load<kT>(grad, j);
    partial += g * g;
  }
  partials[b] = partial;
}

// One thread per segment: the partials added in block order in double.
template <Elem kT>
__global__ void SegmentSumsKernel(const void* grad, SumSegments segs,
                                  const float* partials, double* sum_squares,
                                  int64_t* nonfinite) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= segs.count) return;
  double sq = 0;
  int64_t bad = 0;
  const int64_t blocks =
      (segs.end[k] - segs.begin[k] + kSumBlock - 1) / kSumBlock;
  for (int64_t j = 0; j < blocks; ++j) {
    const float p = partials[segs.first_block[k] + j];
    if (isfinite(p)) {
      sq += p;
      continue;
    }
    const int64_t start = segs.begin[k] + j * kSumBlock;
    const int64_t stop =
        start + kSumBlock < segs.end[k] ? start + kSumBlock : segs.end[k];
    for (int64_t i = start; i < stop; ++i) {
      const float g = Load<kT>(grad, i);
      if (isfinite(g)) {
        sq += static_cast<double>(g) * g;
      } else {
        ++bad;
      }
    }
  }
  sum_squares[k] = sq;
  nonfinite[k] = bad;
}

int64_t TotalBlocks(const SumSegments& segs) {
  if (segs.count == 0) return 0;
  const int k = segs.count - 1;
  return segs.first_block[k] +
         (segs.end[k] - segs.begin[k] + kSumBlock - 1) / kSumBlock;
}

}  // namespace

int LaunchCast(const float* master, void* param, Elem type, int64_t begin,
               int64_t end, void* stream) {
  if (end <= begin) return 0;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  const int blocks = Blocks(end - begin);
  switch (type) {
    case Elem::kBf16:
      CastKernel<Elem::kBf16>
          <<<blocks, kThreads, 0, s>>>(master, param, begin, end);
      break;
    case Elem::kFp16:
      CastKernel<Elem::kFp16>
          <<<blocks, kThreads, 0, s>>>(master, param, begin, end);
      break;
    case Elem::kFp32:
      CastKernel<Elem::kFp32>
          <<<blocks, kThreads, 0, s>>>(master, param, begin, end);
      break;
  }
  return static_cast<int>(cudaGetLastError());
}

int LaunchBlockPartials(const void* grad, Elem type, const SumSegments& segs,
                        float* partials, void* stream) {
  const int64_t total = TotalBlocks(segs) - segs.first_block[0];
  if (segs.count == 0 || total <= 0) return 0;
  // Blocks are numbered from first_block[0]: shift the table so the grid
  // starts at 0 and the partials land at their global index.
  SumSegments shifted = segs;
  for (int k = 0; k < segs.count; ++k) {
    shifted.first_block[k] -= segs.first_block[0];
  }
  float* out = partials + segs.first_block[0];
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  const int blocks = static_cast<int>((total + kThreads - 1) / kThreads);
  switch (type) {
    case Elem::kBf16:
      PartialsKernel<Elem::kBf16>
          <<<blocks, kThreads, 0, s>>>(grad, shifted, total, out);
      break;
    case Elem::kFp16:
      PartialsKernel<Elem::kFp16>
          <<<blocks, kThreads, 0, s>>>(grad, shifted, total, out);
      break;
    case Elem::kFp32:
      PartialsKernel<Elem::kFp32>
          <<<blocks, kThreads, 0, s>>>(grad, shifted, total, out);
      break;
  }
  return static_cast<int>(cudaGetLastError());
}

int LaunchSegmentSums(const void* grad, Elem type, const SumSegments& segs,
                      const float* partials, double* sum_squares,
                      int64_t* nonfinite, void* stream) {
  if (segs.count == 0) return 0;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  const int blocks = (segs.count + kThreads - 1) / kThreads;
  switch (type) {
    case Elem::kBf16:
      SegmentSumsKernel<Elem::kBf16><<<blocks, kThreads, 0, s>>>(
          grad, segs, partials, sum_squares, nonfinite);
      break;
    case Elem::kFp16:
      SegmentSumsKernel<Elem::kFp16><<<blocks, kThreads, 0, s>>>(
          grad, segs, partials, sum_squares, nonfinite);
      break;
    case Elem::kFp32:
      SegmentSumsKernel<Elem::kFp32><<<blocks, kThreads, 0, s>>>(
          grad, segs, partials, sum_squares, nonfinite);
      break;
  }
  return static_cast<int>(cudaGetLastError());
}

int LaunchScale(void* data, Elem type, int64_t n, float factor, void* stream) {
  if (n <= 0) return 0;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  const int blocks = Blocks(n);
  switch (type) {
    case Elem::kBf16:
      ScaleKernel<Elem::kBf16><<<blocks, kThreads, 0, s>>>(data, n, factor);
      break;
    case Elem::kFp16:
      ScaleKernel<Elem::kFp16><<<blocks, kThreads, 0, s>>>(data, n, factor);
      break;
    case Elem::kFp32:
      ScaleKernel<Elem::kFp32><<<blocks, kThreads, 0, s>>>(data, n, factor);
      break;
  }
  return static_cast<int>(cudaGetLastError());
}

}  // namespace zshard::device::cuda_kernels
