// The dashboard's HTTP routes on the coordinator's HTTP port (beside
// /metrics): the page's static files at /, the Connect unary JSON routes of
// DashboardService and AdminService (JsonGateway), and two Server-Sent
// Events streams: /events/stream (every event, from WatchEvents) and
// /plan/stream (GetClusterStatus after every event, GetPlan whenever it
// changes).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "server/web/json_gateway.h"

namespace httplib {
class Server;
struct Response;
}  // namespace httplib

namespace zshard::server::web {

struct WebOptions {
  // Bound on each unary call made for the page.
  int64_t call_timeout_ms = 10000;
  // How often an idle stream writes an SSE comment (and so notices a
  // browser that went away).
  int64_t keepalive_ms = 1000;
  // Whether AdminService (drain) is served. Off while gRPC runs TLS: this
  // port is plain HTTP and the admin token would travel in clear; the
  // routes then answer failed_precondition naming zshardctl.
  bool admin = true;
};

// Thread-safe. Install once before the server listens; Stop before the
// HTTP server stops (its open streams end within keepalive_ms).
class WebRoutes {
 public:
  WebRoutes(ChannelSource channels, WebOptions options = {});

  void Install(httplib::Server* http);
  void Stop();

  const JsonGateway& gateway() const { return gateway_; }

 private:
  // The channel a stream reads from, with the response's no-store header;
  // null (and `res` a 503 Connect error) when no gRPC server runs.
  std::shared_ptr<grpc::Channel> StreamChannel(httplib::Response& res);
  void ServeEvents(httplib::Server* http);
  void ServePlan(httplib::Server* http);

  const ChannelSource channels_;
  const WebOptions options_;
  JsonGateway gateway_;
  // Shared with the open streams' providers, which may outlive a call.
  std::shared_ptr<std::atomic<bool>> stopping_;
};

}  // namespace zshard::server::web
