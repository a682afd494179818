// CpuAdam: splits the non-padding elements of a slice evenly between
// threads (in whole cache lines) and runs the chosen kernel on each share.
#include "client/worker/optim/cpu_adam.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace zshard::optim {
namespace {

// A run of elements to update with one decay factor, at position `pos` of
// the concatenation of all runs.
struct Run {
  int64_t begin;
  int64_t end;
  float decay;
  int64_t pos;
};

// Chunks are multiples of this many elements (64 fp32 = 4 cache lines): when
// the runs start on cache lines (parameters are 64-aligned in a bucket), no
// two threads write the same line of master, m or v.
constexpr int64_t kChunkGrain = 64;

}  // namespace

absl::StatusOr<std::unique_ptr<CpuAdam>> CpuAdam::Create(
    const CpuAdamOptions& options) {
  if (options.num_threads < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cpu adam num_threads ", options.num_threads, " is negative"));
  }
  if (options.min_elements_per_thread < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("cpu adam min_elements_per_thread ",
                     options.min_elements_per_thread, " is not >= 1"));
  }
  if (options.chunk_elements < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cpu adam chunk_elements ", options.chunk_elements, " is not >= 1"));
  }
  if (!CpuAdamPathSupported(options.path)) {
    return absl::InvalidArgumentError(
        absl::StrCat("cpu adam path '", CpuAdamPathName(options.path),
                     "' is not supported by this cpu"));
  }
  int threads = options.num_threads;
  if (threads == 0) {
    threads = std::max(1u, std::thread::hardware_concurrency());
  }
  return std::unique_ptr<CpuAdam>(
      new CpuAdam(options, ResolveCpuAdamPath(options.path), threads));
}

CpuAdam::CpuAdam(const CpuAdamOptions& options, CpuAdamPath path, int threads)
    : options_(options),
      path_(path),
      chunk_elements_((options.chunk_elements + kChunkGrain - 1) / kChunkGrain *
                      kChunkGrain),
      pool_(threads) {}

absl::Status CpuAdam::DoUpdate(const AdamStepParams& params,
                               absl::Span<const Segment> segments,
                               float* master, float* m, float* v,
                               const void* grad, plan::DType grad_dtype,
                               void* param_out, plan::DType param_dtype,
                               int64_t n) {
  std::vector<Run> runs;
  const Segment whole{0, n, false, false};
  if (segments.empty()) segments = absl::MakeConstSpan(&whole, 1);
  int64_t total = 0;
  for (const Segment& seg : segments) {
    if (seg.padding || seg.end == seg.begin) continue;
    runs.push_back(
        {seg.begin, seg.end, seg.no_weight_decay ? 1.0f : params.decay, total});
    total += seg.end - seg.begin;
  }
  if (total == 0) return absl::OkStatus();

  const AdamSlice slice{master, m, v, grad, grad_dtype, param_out, param_dtype};
  const int64_t max_threads =
      std::max<int64_t>(1, total / options_.min_elements_per_thread);
  const int threads =
      static_cast<int>(std::min<int64_t>(pool_.num_threads(), max_threads));
  // Threads claim chunks of the concatenated runs from a shared counter, so
  // a thread the OS preempts (shared machines) delays the step by at most a
  // chunk instead of its whole share. Results do not depend on the split.
  const int64_t chunk = chunk_elements_;
  const int64_t chunks = (total + chunk - 1) / chunk;
  std::atomic<int64_t> next{0};
  auto work = [&](int) {
    size_t r = 0;
    for (int64_t c = next.fetch_add(1); c < chunks; c = next.fetch_add(1)) {
      const int64_t lo = c * chunk;
      const int64_t hi = std::min(total, lo + chunk);
      while (runs[r].pos + (runs[r].end - runs[r].begin) <= lo) ++r;
      for (size_t k = r; k < runs.size() && runs[k].pos < hi; ++k) {
        const Run& run = runs[k];
        const int64_t from = std::max(lo, run.pos) - run.pos;
        const int64_t to =
            std::min(hi, run.pos + (run.end - run.begin)) - run.pos;
        RunCpuAdamKernel(path_, params, slice, run.begin + from, run.begin + to,
                         run.decay);
      }
    }
  };
  pool_.Run(threads, work);
  return absl::OkStatus();
}

}  // namespace zshard::optim
