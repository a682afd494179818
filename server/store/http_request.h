// One plain HTTP/1.1 request on its own connection (Connection: close),
// for etcd's JSON gateway. A small client of its own because the gateway
// ends its error responses with chunked trailers (Grpc-Trailer-*), which
// cpp-httplib 0.11 cannot read; this one decodes chunked bodies and skips
// trailers, and says why a connection failed (refused, timed out).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace zshard::server {

struct HttpResponse {
  int status = 0;
  std::string body;  // de-chunked
};

struct HttpRequestOptions {
  std::string method = "POST";
  std::string host;  // name or address; [v6] brackets removed
  int port = 0;
  std::string path = "/";
  std::string body;
  std::string content_type = "application/json";
  // Connecting gives up after this long.
  int64_t connect_timeout_ms = 2000;
  // The whole exchange after connecting (send and full response).
  int64_t request_timeout_ms = 5000;
};

// Unavailable with the reason in lower case ("connection refused",
// "connect timed out after 2000 ms", "no response within 5000 ms",
// "cannot resolve host 'x'") when no complete response came; any status
// code the server sent is returned as a response.
absl::StatusOr<HttpResponse> HttpRequest(const HttpRequestOptions& options);

}  // namespace zshard::server
