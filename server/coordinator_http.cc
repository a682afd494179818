// The coordinator's HTTP port: the dashboard (server/web/), /metrics,
// /healthz and /leader, and the address it is advertised at.
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "server/coordinator.h"
#include "server/host_port.h"
#include "server/leadership.h"
#include "server/metrics/metrics_server.h"
#include "server/metrics/rpc_metrics.h"
#include "server/web/web_routes.h"

namespace zshard::server {

absl::Status Coordinator::StartHttpLocked() {
  if (options_.http_listen.empty()) return absl::OkStatus();
  ZSHARD_ASSIGN_OR_RETURN(const HostPort listen,
                          ParseHostPort(options_.http_listen));
  metrics_server_ = std::make_unique<MetricsServer>();
  web::WebOptions web_options;
  web_options.admin = options_.tls_cert_pem.empty();
  web_routes_ = std::make_unique<web::WebRoutes>(
      [this] { return LocalChannel(); }, web_options);
  web::WebRoutes* routes = web_routes_.get();
  MetricsServer::Extra extra;
  extra.install = [routes](httplib::Server* http) { routes->Install(http); };
  extra.stop = [routes] { routes->Stop(); };
  // Its handlers wait for role_mu_ (held by Start) before they answer.
  ZSHARD_ASSIGN_OR_RETURN(
      http_port_,
      metrics_server_->Start(
          listen.host, listen.port, [this] { return RenderMetrics(); },
          [this] { return leading(); }, std::move(extra)));
  http_advertise_ = options_.http_advertise.empty()
                        ? AdvertisedAddress(listen.host, http_port_)
                        : options_.http_advertise;
  absl::MutexLock view_lock(&view_mu_);
  view_http_advertise_ = http_advertise_;
  return absl::OkStatus();
}

std::string Coordinator::RenderMetrics() {
  absl::MutexLock lock(&role_mu_);
  std::string out = absl::StrCat(
      "# HELP zshard_leader 1 while this coordinator leads its store, 0 while "
      "it stands by.\n",
      "# TYPE zshard_leader gauge\n", "zshard_leader ",
      leadership_ != nullptr ? 1 : 0, "\n");
  if (leadership_ != nullptr) {
    absl::StrAppend(&out, leadership_->RenderMetrics());
  }
  absl::StrAppend(&out, rpc_metrics_->Render());
  return out;
}

}  // namespace zshard::server
