// cpp-httplib server for /metrics.
#include "server/metrics/metrics_server.h"

#include <httplib.h>

#include <utility>

#include "absl/strings/str_cat.h"

namespace zshard::server {

MetricsServer::MetricsServer() : http_(std::make_unique<httplib::Server>()) {}

MetricsServer::~MetricsServer() { Stop(); }

absl::StatusOr<int> MetricsServer::Start(const std::string& host, int port,
                                         Render render, Leading leading,
                                         Extra extra) {
  http_->Get("/metrics", [render = std::move(render)](const httplib::Request&,
                                                      httplib::Response& res) {
    res.set_content(render(), "text/plain; version=0.0.4");
  });
  http_->Get("/leader", [leading = std::move(leading)](const httplib::Request&,
                                                       httplib::Response& res) {
    const bool leads = leading();
    res.status = leads ? 200 : 503;
    res.set_content(leads ? "leader\n" : "standby\n", "text/plain");
  });
  if (extra.install) extra.install(http_.get());
  stop_extra_ = std::move(extra.stop);
  int bound = port;
  if (port == 0) {
    bound = http_->bind_to_any_port(host);
    if (bound < 0) bound = 0;
  } else if (!http_->bind_to_port(host, port)) {
    bound = 0;
  }
  if (bound <= 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen for metrics on ", host, ":", port));
  }
  thread_ = std::thread([this] { http_->listen_after_bind(); });
  return bound;
}

void MetricsServer::Stop() {
  if (thread_.joinable()) {
    if (stop_extra_) stop_extra_();
    http_->stop();
    thread_.join();
  }
}

}  // namespace zshard::server
