// The worker's HTTP endpoint for orchestrators: GET /healthz (200 while the
// session is alive, 503 otherwise) and GET /metrics (Prometheus text:
// zshard_worker_up, zshard_worker_step, zshard_worker_epoch).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace httplib {
class Server;
}

namespace zshard::worker {

// What the endpoint reports; read on every request.
struct HealthSnapshot {
  // Joined and neither fenced nor ended.
  bool alive = false;
  int64_t step = 0;
  int64_t epoch = 0;
};

// Serves on its own thread. Thread-safe; `probe` is called from that
// thread and must be thread-safe.
class HealthServer {
 public:
  using Probe = std::function<HealthSnapshot()>;

  // Binds `listen` ("HOST:PORT", port 0 picks a free one) and starts
  // serving. InvalidArgument for a malformed address, Unavailable when it
  // cannot bind.
  static absl::StatusOr<std::unique_ptr<HealthServer>> Start(
      const std::string& listen, std::string worker_name, Probe probe);
  // Stops serving and joins the thread.
  ~HealthServer();

  int port() const { return port_; }

  // The Prometheus text for `snapshot` (exposed for tests).
  static std::string RenderMetrics(const std::string& worker_name,
                                   const HealthSnapshot& snapshot);

 private:
  HealthServer() = default;

  std::unique_ptr<httplib::Server> http_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace zshard::worker
