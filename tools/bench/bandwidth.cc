// The AdamW traffic bound: one fork-join on a pool per pass, threads
// claiming chunks from a shared counter.
#include "tools/bench/bandwidth.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "client/worker/optim/thread_pool.h"

namespace zshard::bench {
namespace {

// One chunk: the step's loads and stores, in the step's order (every load
// of a vector of elements, then its stores) and in vectors of 16 floats as
// CpuAdam's widest path takes them (cloned for AVX-512 and AVX2, the
// widths of its paths). `zero` is read at run time so that no store can be
// proven a no-op.
typedef float F16 __attribute__((vector_size(64)));
typedef uint16_t H16 __attribute__((vector_size(32)));

__attribute__((target_clones("avx512f", "avx2", "default"))) void MoveChunk16(
    float* __restrict master, float* __restrict m, float* __restrict v,
    const uint16_t* __restrict grad, uint16_t* __restrict param, int64_t i,
    int64_t hi, float zero) {
  for (; i + 16 <= hi; i += 16) {
    F16 x, y, w;
    H16 g;
    std::memcpy(&x, master + i, sizeof(x));
    std::memcpy(&y, m + i, sizeof(y));
    std::memcpy(&w, v + i, sizeof(w));
    std::memcpy(&g, grad + i, sizeof(g));
    x += zero;
    y += zero;
    w += zero;
    std::memcpy(master + i, &x, sizeof(x));
    std::memcpy(m + i, &y, sizeof(y));
    std::memcpy(v + i, &w, sizeof(w));
    std::memcpy(param + i, &g, sizeof(g));
  }
  for (; i < hi; ++i) {
    master[i] += zero;
    m[i] += zero;
    v[i] += zero;
    param[i] = grad[i];
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<AdamBound>> AdamBound::Create(
    const AdamTraffic& buffers, int threads, int64_t chunk_elements) {
  if (threads < 1 || chunk_elements < 1 || buffers.n < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the adam bound needs threads, chunk_elements and params >= 1 (got ",
        threads, ", ", chunk_elements, ", ", buffers.n, ")"));
  }
  return std::unique_ptr<AdamBound>(
      new AdamBound(buffers, threads, chunk_elements));
}

AdamBound::AdamBound(const AdamTraffic& buffers, int threads,
                     int64_t chunk_elements)
    : buffers_(buffers),
      threads_(threads),
      chunk_elements_(chunk_elements),
      pool_(std::make_unique<optim::ThreadPool>(threads)) {
  volatile float zero_source = 0.0f;
  zero_ = zero_source;
}

AdamBound::~AdamBound() = default;

double AdamBound::Pass() {
  const AdamTraffic& b = buffers_;
  const int64_t chunks = (b.n + chunk_elements_ - 1) / chunk_elements_;
  std::atomic<int64_t> next{0};
  const auto start = std::chrono::steady_clock::now();
  pool_->Run(threads_, [&](int) {
    for (int64_t c = next.fetch_add(1); c < chunks; c = next.fetch_add(1)) {
      const int64_t lo = c * chunk_elements_;
      MoveChunk16(b.master, b.m, b.v, b.grad, b.param, lo,
                  std::min(b.n, lo + chunk_elements_), zero_);
    }
  });
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

}  // namespace zshard::bench
