// Prometheus rendering of RPC counters and latency histograms.
#include "server/metrics/rpc_metrics.h"

#include "absl/strings/str_cat.h"

namespace zshard::server {

void RpcMetrics::Record(const std::string& method, int code, double seconds) {
  absl::MutexLock lock(&mu_);
  ++requests_[{method, code}];
  Histogram& h = latency_[method];
  size_t i = 0;
  while (i < kBuckets.size() && seconds > kBuckets[i]) ++i;
  ++h.counts[i];
  h.sum += seconds;
  ++h.count;
}

std::string RpcMetrics::Render() {
  absl::MutexLock lock(&mu_);
  std::string out =
      "# HELP zshard_rpc_requests_total RPCs handled, by method and code.\n"
      "# TYPE zshard_rpc_requests_total counter\n";
  for (const auto& [key, n] : requests_) {
    absl::StrAppend(&out, "zshard_rpc_requests_total{method=\"", key.first,
                    "\",code=\"", key.second, "\"} ", n, "\n");
  }
  absl::StrAppend(
      &out,
      "# HELP zshard_rpc_latency_seconds RPC handling time, by method.\n"
      "# TYPE zshard_rpc_latency_seconds histogram\n");
  for (const auto& [method, h] : latency_) {
    int64_t cumulative = 0;
    for (size_t i = 0; i <= kBuckets.size(); ++i) {
      cumulative += h.counts[i];
      std::string le = i < kBuckets.size() ? absl::StrCat(kBuckets[i]) : "+Inf";
      absl::StrAppend(&out, "zshard_rpc_latency_seconds_bucket{method=\"",
                      method, "\",le=\"", le, "\"} ", cumulative, "\n");
    }
    absl::StrAppend(&out, "zshard_rpc_latency_seconds_sum{method=\"", method,
                    "\"} ", h.sum, "\n",
                    "zshard_rpc_latency_seconds_count{method=\"", method,
                    "\"} ", h.count, "\n");
  }
  return out;
}

}  // namespace zshard::server
