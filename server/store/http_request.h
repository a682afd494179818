// One HTTP/1.1 request on its own connection (Connection: close), plain or
// over TLS (OpenSSL), for etcd's JSON gateway. A small client of its own
// because the gateway ends its error responses with chunked trailers
// (Grpc-Trailer-*), which cpp-httplib 0.11 cannot read; this one decodes
// chunked bodies and skips trailers, and says why a connection failed
// (refused, timed out, the TLS handshake's reason).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace zshard::server {

struct HttpTlsOptions {
  // PEM file of the CA that the server's certificate must chain to; the
  // certificate must also name the host (DNS name or IP address).
  std::string ca_file;
  // PEM client certificate and key (both or neither), for servers that
  // require client certificates.
  std::string cert_file;
  std::string key_file;
};

// An OpenSSL client context, shared by the requests that use it.
class HttpTls {
 public:
  // InvalidArgument naming the file that cannot be read or used.
  static absl::StatusOr<std::shared_ptr<HttpTls>> Create(
      const HttpTlsOptions& options);
  ~HttpTls();
  HttpTls(const HttpTls&) = delete;
  HttpTls& operator=(const HttpTls&) = delete;
  // The SSL_CTX*.
  void* context() const { return ctx_; }

 private:
  explicit HttpTls(void* ctx) : ctx_(ctx) {}
  void* ctx_;
};

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
  // Each send or receive after connecting (and the TLS handshake).
  int64_t request_timeout_ms = 5000;
  // Null: plain HTTP; else HTTPS with this context.
  std::shared_ptr<HttpTls> tls;
};

// Unavailable with the reason in lower case ("connection refused",
// "connect timed out after 2000 ms", "no response within 5000 ms",
// "cannot resolve host 'x'", "tls handshake failed: certificate verify
// failed") when no complete response came; any status code the server sent
// is returned as a response.
absl::StatusOr<HttpResponse> HttpRequest(const HttpRequestOptions& options);

}  // namespace zshard::server
