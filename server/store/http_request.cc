// HTTP/1.1 over a socket with send/receive timeouts, plain or TLS; chunked
// decoding.
#include "server/store/http_request.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace zshard::server {
namespace {

using Clock = std::chrono::steady_clock;

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

struct SslFree {
  void operator()(SSL* ssl) const { SSL_free(ssl); }
};

// The reason of the last OpenSSL error, in lower case.
std::string SslReason() {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "the connection was closed";
  const char* reason = ERR_reason_error_string(e);
  return reason != nullptr ? absl::AsciiStrToLower(reason)
                           : absl::StrCat("openssl error ", e);
}

// Connects to host:port within the timeout.
absl::StatusOr<int> Connect(const HttpRequestOptions& o) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  if (getaddrinfo(o.host.c_str(), std::to_string(o.port).c_str(), &hints,
                  &list) != 0 ||
      list == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot resolve host '", o.host, "'"));
  }
  std::string why = "connection refused";
  const Clock::time_point deadline =
      Clock::now() + std::chrono::milliseconds(o.connect_timeout_ms);
  for (addrinfo* a = list; a != nullptr; a = a->ai_next) {
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                    a->ai_protocol);
    if (fd < 0) continue;
    int r = connect(fd, a->ai_addr, a->ai_addrlen);
    if (r != 0 && errno == EINPROGRESS) {
      const int64_t left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
                                                                Clock::now())
              .count();
      pollfd p{fd, POLLOUT, 0};
      if (left <= 0 || poll(&p, 1, static_cast<int>(left)) <= 0) {
        why = absl::StrCat("connect timed out after ", o.connect_timeout_ms,
                           " ms");
        close(fd);
        continue;
      }
      int err = 0;
      socklen_t len = sizeof(err);
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      r = err == 0 ? 0 : -1;
      errno = err;
    }
    if (r == 0) {
      freeaddrinfo(list);
      // Blocking from here on, each send and receive bounded.
      fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
      timeval tv{
          static_cast<time_t>(o.request_timeout_ms / 1000),
          static_cast<suseconds_t>((o.request_timeout_ms % 1000) * 1000)};
      setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
      setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
      return fd;
    }
    why = errno == ECONNREFUSED ? "connection refused"
                                : absl::AsciiStrToLower(std::strerror(errno));
    close(fd);
  }
  freeaddrinfo(list);
  return absl::UnavailableError(why);
}

// TLS over `fd`: the handshake, verifying the certificate names `host`.
absl::StatusOr<std::unique_ptr<SSL, SslFree>> Handshake(
    const HttpRequestOptions& o, int fd) {
  std::unique_ptr<SSL, SslFree> ssl(
      SSL_new(static_cast<SSL_CTX*>(o.tls->context())));
  if (ssl == nullptr) return absl::InternalError("SSL_new failed");
  SSL_set_fd(ssl.get(), fd);
  in6_addr ip;
  const bool is_ip = inet_pton(AF_INET, o.host.c_str(), &ip) == 1 ||
                     inet_pton(AF_INET6, o.host.c_str(), &ip) == 1;
  if (is_ip) {
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl.get()), o.host.c_str());
  } else {
    SSL_set_tlsext_host_name(ssl.get(), o.host.c_str());
    SSL_set1_host(ssl.get(), o.host.c_str());
  }
  ERR_clear_error();
  if (SSL_connect(ssl.get()) != 1) {
    const long verify = SSL_get_verify_result(ssl.get());
    std::string why = verify != X509_V_OK
                          ? X509_verify_cert_error_string(verify)
                          : SslReason();
    return absl::UnavailableError(
        absl::StrCat("tls handshake failed: ", absl::AsciiStrToLower(why)));
  }
  return ssl;
}

// Decodes a chunked body; trailers after the last chunk are skipped.
bool Dechunk(const std::string& in, std::string* out) {
  size_t pos = 0;
  while (true) {
    size_t eol = in.find("\r\n", pos);
    if (eol == std::string::npos) return false;
    std::string size_text = in.substr(pos, eol - pos);
    size_text = size_text.substr(0, size_text.find(';'));
    size_t size = 0;
    if (!absl::SimpleHexAtoi(absl::StripAsciiWhitespace(size_text), &size)) {
      return false;
    }
    pos = eol + 2;
    if (size == 0) return true;
    if (pos + size > in.size()) return false;
    out->append(in, pos, size);
    pos += size + 2;
  }
}

}  // namespace

absl::StatusOr<std::shared_ptr<HttpTls>> HttpTls::Create(
    const HttpTlsOptions& options) {
  if (options.cert_file.empty() != options.key_file.empty()) {
    return absl::InvalidArgumentError(
        "tls client cert and key must be given together");
  }
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  if (ctx == nullptr) return absl::InternalError("SSL_CTX_new failed");
  std::shared_ptr<HttpTls> tls(new HttpTls(ctx));
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  // A server that closes after Connection: close without close_notify
  // has still sent the whole response.
  SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  const bool ca_ok = options.ca_file.empty()
                         ? SSL_CTX_set_default_verify_paths(ctx) == 1
                         : SSL_CTX_load_verify_locations(
                               ctx, options.ca_file.c_str(), nullptr) == 1;
  if (!ca_ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tls ca file '", options.ca_file, "' is unusable: ", SslReason()));
  }
  if (!options.cert_file.empty()) {
    if (SSL_CTX_use_certificate_chain_file(ctx, options.cert_file.c_str()) !=
        1) {
      return absl::InvalidArgumentError(
          absl::StrCat("tls cert file '", options.cert_file,
                       "' is unusable: ", SslReason()));
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, options.key_file.c_str(),
                                    SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(ctx) != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tls key file '", options.key_file, "' is unusable: ", SslReason()));
    }
  }
  return tls;
}

HttpTls::~HttpTls() { SSL_CTX_free(static_cast<SSL_CTX*>(ctx_)); }

absl::StatusOr<HttpResponse> HttpRequest(const HttpRequestOptions& o) {
  absl::StatusOr<int> connected = Connect(o);
  if (!connected.ok()) return connected.status();
  Fd fd(*connected);
  std::unique_ptr<SSL, SslFree> ssl;
  if (o.tls != nullptr) {
    auto handshake = Handshake(o, fd.get());
    if (!handshake.ok()) return handshake.status();
    ssl = *std::move(handshake);
  }
  const std::string no_response =
      absl::StrCat("no response within ", o.request_timeout_ms, " ms");
  // Sends or receives up to n bytes: > 0 done, 0 the peer closed, < 0 an
  // error (`why` says which).
  std::string why;
  auto io = [&](bool send_it, char* data, size_t n) -> ssize_t {
    if (ssl != nullptr) {
      ERR_clear_error();
      const int len = static_cast<int>(std::min<size_t>(n, 1 << 30));
      const int r = send_it ? SSL_write(ssl.get(), data, len)
                            : SSL_read(ssl.get(), data, len);
      if (r > 0) return r;
      const int err = SSL_get_error(ssl.get(), r);
      if (err == SSL_ERROR_ZERO_RETURN) return 0;
      if (err == SSL_ERROR_SYSCALL &&
          (errno == EAGAIN || errno == EWOULDBLOCK)) {
        why = no_response;
      } else {
        why = absl::StrCat("tls: ", SslReason());
      }
      return -1;
    }
    while (true) {
      const ssize_t r = send_it ? send(fd.get(), data, n, MSG_NOSIGNAL)
                                : recv(fd.get(), data, n, 0);
      if (r >= 0) return r;
      if (errno == EINTR) continue;
      why = errno == EAGAIN || errno == EWOULDBLOCK
                ? no_response
                : absl::StrCat("connection lost: ",
                               absl::AsciiStrToLower(std::strerror(errno)));
      return -1;
    }
  };
  std::string request = absl::StrCat(
      o.method, " ", o.path, " HTTP/1.1\r\nHost: ", o.host, ":", o.port,
      "\r\nConnection: close\r\nContent-Type: ", o.content_type,
      "\r\nContent-Length: ", o.body.size(), "\r\n\r\n", o.body);
  for (size_t sent = 0; sent < request.size();) {
    const ssize_t n = io(true, request.data() + sent, request.size() - sent);
    if (n <= 0)
      return absl::UnavailableError(n < 0 ? why : "connection closed");
    sent += static_cast<size_t>(n);
  }
  std::string raw;
  char buf[16384];
  while (true) {
    const ssize_t n = io(false, buf, sizeof(buf));
    if (n == 0) break;  // the server closed: the response is complete
    if (n < 0) return absl::UnavailableError(why);
    raw.append(buf, static_cast<size_t>(n));
  }
  if (raw.empty()) {
    // A TLS server closes on a plain request without a word.
    return absl::UnavailableError(absl::StrCat(
        "the server closed the connection without a response",
        o.tls == nullptr ? " (does it want TLS? no tls ca was given)" : ""));
  }
  const size_t head_end = raw.find("\r\n\r\n");
  HttpResponse response;
  if (head_end == std::string::npos || !absl::StartsWith(raw, "HTTP/1.") ||
      raw.size() < 12 ||
      !absl::SimpleAtoi(raw.substr(9, 3), &response.status)) {
    return absl::UnavailableError("the response is not HTTP");
  }
  const std::string head = absl::AsciiStrToLower(raw.substr(0, head_end));
  std::string body = raw.substr(head_end + 4);
  if (absl::StrContains(head, "\r\ntransfer-encoding: chunked")) {
    if (!Dechunk(body, &response.body)) {
      return absl::UnavailableError("the response's chunked body is cut short");
    }
  } else {
    response.body = std::move(body);
  }
  return response;
}

}  // namespace zshard::server
