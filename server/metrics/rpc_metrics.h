// RPC counters and latency histograms per method and status code, rendered
// in the Prometheus text format.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace zshard::server {

// Thread-safe.
class RpcMetrics {
 public:
  // Upper bounds of the latency buckets, in seconds (+Inf implied).
  static constexpr std::array<double, 11> kBuckets = {
      0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.5, 1.0, 5.0};

  // Counts one finished RPC of `method` with gRPC status `code`.
  void Record(const std::string& method, int code, double seconds);

  // zshard_rpc_requests_total{method,code} and
  // zshard_rpc_latency_seconds{method} histogram lines.
  std::string Render();

 private:
  struct Histogram {
    std::array<int64_t, kBuckets.size() + 1> counts{};
    double sum = 0;
    int64_t count = 0;
  };
  absl::Mutex mu_;
  std::map<std::pair<std::string, int>, int64_t> requests_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Histogram> latency_ ABSL_GUARDED_BY(mu_);
};

}  // namespace zshard::server
