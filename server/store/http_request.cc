// HTTP/1.1 over a blocking socket with poll deadlines; chunked decoding.
#include "server/store/http_request.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

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

int64_t MsLeft(Clock::time_point deadline) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
                                                               Clock::now())
      .count();
}

// Waits until `fd` is ready for `events` or the deadline; false on timeout.
bool WaitReady(int fd, short events, Clock::time_point deadline) {
  while (true) {
    const int64_t left = MsLeft(deadline);
    if (left <= 0) return false;
    pollfd p{fd, events, 0};
    int r = poll(&p, 1, static_cast<int>(left));
    if (r > 0) return true;
    if (r == 0) return false;
    if (errno != EINTR) return true;  // let the next call report it
  }
}

// Connects to host:port within the timeout; the socket is non-blocking.
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
      if (!WaitReady(fd, POLLOUT, deadline)) {
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
      return fd;
    }
    why = errno == ECONNREFUSED ? "connection refused"
                                : absl::AsciiStrToLower(std::strerror(errno));
    close(fd);
  }
  freeaddrinfo(list);
  return absl::UnavailableError(why);
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

absl::StatusOr<HttpResponse> HttpRequest(const HttpRequestOptions& o) {
  absl::StatusOr<int> connected = Connect(o);
  if (!connected.ok()) return connected.status();
  Fd fd(*connected);
  const Clock::time_point deadline =
      Clock::now() + std::chrono::milliseconds(o.request_timeout_ms);
  const std::string no_response =
      absl::StrCat("no response within ", o.request_timeout_ms, " ms");
  std::string request = absl::StrCat(
      o.method, " ", o.path, " HTTP/1.1\r\nHost: ", o.host, ":", o.port,
      "\r\nConnection: close\r\nContent-Type: ", o.content_type,
      "\r\nContent-Length: ", o.body.size(), "\r\n\r\n", o.body);
  size_t sent = 0;
  while (sent < request.size()) {
    ssize_t n = send(fd.get(), request.data() + sent, request.size() - sent,
                     MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (!WaitReady(fd.get(), POLLOUT, deadline)) {
        return absl::UnavailableError(no_response);
      }
    } else {
      return absl::UnavailableError(absl::StrCat(
          "sending failed: ", absl::AsciiStrToLower(std::strerror(errno))));
    }
  }
  std::string raw;
  char buf[16384];
  while (true) {
    ssize_t n = recv(fd.get(), buf, sizeof(buf), 0);
    if (n > 0) {
      raw.append(buf, static_cast<size_t>(n));
    } else if (n == 0) {
      break;  // the server closed: the response is complete
    } else if (errno == EAGAIN || errno == EINTR) {
      if (!WaitReady(fd.get(), POLLIN, deadline)) {
        return absl::UnavailableError(no_response);
      }
    } else {
      return absl::UnavailableError(absl::StrCat(
          "connection lost: ", absl::AsciiStrToLower(std::strerror(errno))));
    }
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
