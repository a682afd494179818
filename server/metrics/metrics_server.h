// The Prometheus endpoint: GET /metrics over HTTP (cpp-httplib) on its own
// thread, rendering the text a callback produces, and GET /leader, a
// readiness check for Kubernetes that needs no TLS and no gRPC (200 on the
// leading coordinator, 503 on a standby), plus any routes a caller adds
// (the dashboard's, server/web/).
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
  using Leading = std::function<bool()>;
  // More routes on the same port: `install` adds them before the server
  // listens (after /metrics and /leader, which match first); `stop` runs
  // before the server stops (to end open streams). Either may be empty.
  struct Extra {
    std::function<void(httplib::Server*)> install;
    std::function<void()> stop;
  };
  MetricsServer();
  ~MetricsServer();

  // Binds `host:port` (port 0: any free port), serves /metrics with the
  // text of `render()` and /leader with 200 "leader" while `leading()`,
  // else 503 "standby". Returns the bound port; Unavailable on bind errors.
  absl::StatusOr<int> Start(const std::string& host, int port, Render render,
                            Leading leading, Extra extra = {});
  // Stops serving and joins the thread. Idempotent.
  void Stop();

 private:
  std::unique_ptr<httplib::Server> http_;
  std::function<void()> stop_extra_;
  std::thread thread_;
};

}  // namespace zshard::server
