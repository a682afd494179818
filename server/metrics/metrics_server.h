// The Prometheus endpoint: GET /metrics over HTTP (cpp-httplib) on its own
// thread, rendering the text a callback produces.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace httplib {
class Server;
}

namespace zshard::server {

// Owns its listening thread. Start once, Stop (or destroy) once.
class MetricsServer {
 public:
  using Render = std::function<std::string()>;
  MetricsServer();
  ~MetricsServer();

  // Binds `host:port` (port 0: any free port) and serves /metrics with the
  // text of `render()`. Returns the bound port; Unavailable on bind errors.
  absl::StatusOr<int> Start(const std::string& host, int port, Render render);
  // Stops serving and joins the thread. Idempotent.
  void Stop();

 private:
  std::unique_ptr<httplib::Server> http_;
  std::thread thread_;
};

}  // namespace zshard::server
