// LatencyStats: a sorted copy on Summarize; the sample count is small
// (workers x seconds).

#include "tools/loadgen/latency_stats.h"

#include <algorithm>
#include <cmath>

namespace zshard::loadgen {

void LatencyStats::Add(int64_t micros) {
  absl::MutexLock lock(&mu_);
  micros_.push_back(micros);
}

int64_t Percentile(const std::vector<int64_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  const double rank = std::ceil(p / 100.0 * static_cast<double>(sorted.size()));
  size_t index = rank <= 1 ? 0 : static_cast<size_t>(rank) - 1;
  return sorted[std::min(index, sorted.size() - 1)];
}

LatencySummary LatencyStats::Summarize() const {
  std::vector<int64_t> sorted;
  {
    absl::MutexLock lock(&mu_);
    sorted = micros_;
  }
  std::sort(sorted.begin(), sorted.end());
  LatencySummary summary;
  summary.count = static_cast<int64_t>(sorted.size());
  summary.p50_ms = Percentile(sorted, 50) / 1000.0;
  summary.p90_ms = Percentile(sorted, 90) / 1000.0;
  summary.p99_ms = Percentile(sorted, 99) / 1000.0;
  summary.max_ms = sorted.empty() ? 0 : sorted.back() / 1000.0;
  return summary;
}

}  // namespace zshard::loadgen
