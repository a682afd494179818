// HealthServer on cpp-httplib.

#include "client/worker/session/health_server.h"

#include <chrono>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "httplib.h"

namespace zshard::worker {

std::string HealthServer::RenderMetrics(const std::string& worker_name,
                                        const HealthSnapshot& snapshot) {
  std::string escaped;
  for (char c : worker_name) {
    if (c == '\\' || c == '"') escaped.push_back('\\');
    if (c == '\n') {
      escaped += "\\n";
      continue;
    }
    escaped.push_back(c);
  }
  const std::string labels = absl::StrCat("{worker=\"", escaped, "\"}");
  return absl::StrCat(
      "# HELP zshard_worker_up 1 while the coordinator session is alive.\n"
      "# TYPE zshard_worker_up gauge\n"
      "zshard_worker_up",
      labels, " ", snapshot.alive ? 1 : 0,
      "\n"
      "# HELP zshard_worker_step Last completed step.\n"
      "# TYPE zshard_worker_step gauge\n"
      "zshard_worker_step",
      labels, " ", snapshot.step,
      "\n"
      "# HELP zshard_worker_epoch Committed epoch the worker runs.\n"
      "# TYPE zshard_worker_epoch gauge\n"
      "zshard_worker_epoch",
      labels, " ", snapshot.epoch, "\n");
}

absl::StatusOr<std::unique_ptr<HealthServer>> HealthServer::Start(
    const std::string& listen, std::string worker_name, Probe probe) {
  const size_t colon = listen.rfind(':');
  int port = -1;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(listen.substr(colon + 1), &port) || port < 0 ||
      port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics address '", listen, "' is not HOST:PORT"));
  }
  std::string host = listen.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  std::unique_ptr<HealthServer> server(new HealthServer());
  server->http_ = std::make_unique<httplib::Server>();
  server->http_->Get("/healthz", [probe](const httplib::Request&,
                                         httplib::Response& response) {
    const bool alive = probe().alive;
    response.status = alive ? 200 : 503;
    response.set_content(alive ? "ok\n" : "session not alive\n", "text/plain");
  });
  server->http_->Get("/metrics",
                     [probe, worker_name](const httplib::Request&,
                                          httplib::Response& response) {
                       response.set_content(RenderMetrics(worker_name, probe()),
                                            "text/plain; version=0.0.4");
                     });
  const int bound = port == 0
                        ? server->http_->bind_to_any_port(host)
                        : (server->http_->bind_to_port(host, port) ? port : -1);
  if (bound <= 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on metrics address '", listen, "'"));
  }
  server->port_ = bound;
  httplib::Server* http = server->http_.get();
  server->thread_ = std::thread([http] { http->listen_after_bind(); });
  return server;
}

HealthServer::~HealthServer() {
  if (!thread_.joinable()) return;
  // stop() only takes effect once the listening loop runs: wait for it
  // (bounded, in case listening failed and the thread already returned).
  for (int i = 0; i < 200 && !http_->is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  http_->stop();
  thread_.join();
}

}  // namespace zshard::worker
