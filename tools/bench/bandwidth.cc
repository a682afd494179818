// The AdamW traffic bound: one fork-join on a pool per pass, threads
// claiming chunks from a shared counter.
#include "tools/bench/bandwidth.h"

#include <algorithm>
#include <atomic>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "client/worker/optim/thread_pool.h"

namespace zshard::bench {
namespace {

// One chunk: the step's loads and stores. `zero` is read at run time so
// that no store can be proven a no-op. Cloned for AVX-512 and AVX2, as
// CpuAdam has paths for both, so the bound is not held back by narrower
// vectors.
__attribute__((target_clones("avx512f", "avx2", "default"))) void MoveChunk(
    float* __restrict master, float* __restrict m, float* __restrict v,
    const uint16_t* __restrict grad, uint16_t* __restrict param, int64_t lo,
    int64_t hi, float zero) {
  for (int64_t i = lo; i < hi; ++i) {
    master[i] += zero;
    m[i] += zero;
    v[i] += zero;
    param[i] = grad[i];
  }
}

}  // namespace

absl::StatusOr<double> MeasureAdamBoundSeconds(
    const AdamTraffic& b, const AdamBoundOptions& options) {
  if (options.threads < 1 || options.chunk_elements < 1 ||
      options.repeats < 1 || b.n < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the adam bound needs threads, chunk_elements, repeats and params >= 1 "
        "(got ",
        options.threads, ", ", options.chunk_elements, ", ", options.repeats,
        ", ", b.n, ")"));
  }
  optim::ThreadPool pool(options.threads);
  const int64_t chunks =
      (b.n + options.chunk_elements - 1) / options.chunk_elements;
  volatile float zero_source = 0.0f;
  const float zero = zero_source;
  double best = 0;
  // One pass more than timed: the first warms the pool and the pages.
  for (int r = 0; r <= options.repeats; ++r) {
    std::atomic<int64_t> next{0};
    const auto start = std::chrono::steady_clock::now();
    pool.Run(options.threads, [&](int) {
      for (int64_t c = next.fetch_add(1); c < chunks; c = next.fetch_add(1)) {
        const int64_t lo = c * options.chunk_elements;
        MoveChunk(b.master, b.m, b.v, b.grad, b.param, lo,
                  std::min(b.n, lo + options.chunk_elements), zero);
      }
    });
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    if (r > 0 && seconds > 0 && (best == 0 || seconds < best)) best = seconds;
  }
  if (best <= 0) {
    return absl::InternalError("the adam bound took no measurable time");
  }
  return best;
}

}  // namespace zshard::bench
