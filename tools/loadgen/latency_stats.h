// Latency samples and their percentiles, for zshard-loadgen's report.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace zshard::loadgen {

// Percentiles in milliseconds (nearest-rank). Zero when there are no
// samples.
struct LatencySummary {
  int64_t count = 0;
  double p50_ms = 0;
  double p90_ms = 0;
  double p99_ms = 0;
  double max_ms = 0;
};

// Collects samples from many threads. Thread-safe.
class LatencyStats {
 public:
  void Add(int64_t micros);
  LatencySummary Summarize() const;

 private:
  mutable absl::Mutex mu_;
  std::vector<int64_t> micros_ ABSL_GUARDED_BY(mu_);
};

// Nearest-rank percentile `p` in [0, 100] of sorted `values`; 0 if empty.
int64_t Percentile(const std::vector<int64_t>& sorted, double p);

}  // namespace zshard::loadgen
