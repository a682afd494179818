// The multi-threaded triad. Each thread first-touches its own share of the
// arrays, then every pass runs one fork-join on the pool.
#include "tools/bench/bandwidth.h"

#include <algorithm>
#include <chrono>
#include <memory>

#include "absl/strings/str_cat.h"
#include "client/worker/optim/thread_pool.h"

namespace zshard::bench {

absl::StatusOr<double> MeasureTriadBytesPerSecond(const TriadOptions& options) {
  if (options.threads < 1 || options.elements < 1 || options.repeats < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "triad needs threads, elements and repeats >= 1 (got ", options.threads,
        ", ", options.elements, ", ", options.repeats, ")"));
  }
  const int64_t n = options.elements;
  std::unique_ptr<double[]> a(new double[n]);
  std::unique_ptr<double[]> b(new double[n]);
  std::unique_ptr<double[]> c(new double[n]);
  optim::ThreadPool pool(options.threads);
  const int t = options.threads;
  auto share = [n, t](int k, int64_t* lo, int64_t* hi) {
    *lo = n * k / t;
    *hi = n * (k + 1) / t;
  };
  pool.Run(t, [&](int k) {
    int64_t lo, hi;
    share(k, &lo, &hi);
    for (int64_t i = lo; i < hi; ++i) {
      a[i] = 0.0;
      b[i] = 1.0;
      c[i] = 2.0;
    }
  });
  const double scalar = 3.0;
  double best = 0;
  for (int r = 0; r < options.repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    pool.Run(t, [&](int k) {
      int64_t lo, hi;
      share(k, &lo, &hi);
      double* __restrict pa = a.get();
      const double* __restrict pb = b.get();
      const double* __restrict pc = c.get();
      for (int64_t i = lo; i < hi; ++i) pa[i] = pb[i] + scalar * pc[i];
    });
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    if (seconds > 0) best = std::max(best, 24.0 * n / seconds);
  }
  if (a[n / 2] != 1.0 + scalar * 2.0) {
    return absl::InternalError("triad produced a wrong value");
  }
  return best;
}

}  // namespace zshard::bench
