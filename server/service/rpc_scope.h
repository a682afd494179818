// Times one RPC handler and records its method, code and latency in
// RpcMetrics when the handler returns its status through Finish().
#pragma once

#include <chrono>
#include <string>

#include "grpcpp/support/status.h"
#include "server/metrics/rpc_metrics.h"

namespace zshard::server {

class RpcScope {
 public:
  // `metrics` may be null (nothing recorded); it must outlive the scope.
  RpcScope(RpcMetrics* metrics, const char* method)
      : metrics_(metrics),
        method_(method),
        start_(std::chrono::steady_clock::now()) {}

  // Records and passes `status` through: `return scope.Finish(s);`.
  grpc::Status Finish(grpc::Status status) {
    if (metrics_ != nullptr) {
      std::chrono::duration<double> d =
          std::chrono::steady_clock::now() - start_;
      metrics_->Record(method_, static_cast<int>(status.error_code()),
                       d.count());
    }
    return status;
  }

 private:
  RpcMetrics* metrics_;
  const char* method_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace zshard::server
