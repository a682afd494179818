// SendFds and ReceiveFds: sendmsg/recvmsg with SCM_RIGHTS, non-blocking
// calls polled against one deadline.
#include "client/worker/device/fd_passing.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace zshard::device {
namespace {

using Clock = std::chrono::steady_clock;

// Room for kMaxPassedFds descriptors in one control message.
constexpr size_t kControlBytes = CMSG_SPACE(sizeof(int) * kMaxPassedFds);

// Waits until `socket` is ready for `events` or `deadline` passes.
absl::Status WaitReady(int socket, short events, Clock::time_point deadline,
                       const char* what) {
  while (true) {
    const auto now = Clock::now();
    if (now >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat(what, " on socket ", socket, ": timed out"));
    }
    // Rounded up: never wakes before the deadline just to find it not due.
    const int64_t left =
        std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count();
    pollfd p{socket, events, 0};
    const int n = poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
    if (n > 0) return absl::OkStatus();
    if (n < 0 && errno != EINTR) {
      return absl::UnavailableError(
          absl::StrCat(what, " on socket ", socket,
                       ": poll failed: ", std::strerror(errno)));
    }
  }
}

absl::Status CheckUnixSocket(int socket, const char* what) {
  int domain = 0;
  socklen_t len = sizeof(domain);
  if (getsockopt(socket, SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0 ||
      domain != AF_UNIX) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": fd ", socket, " is not a unix domain socket"));
  }
  return absl::OkStatus();
}

absl::Status PeerGone(const char* what, int socket, int err) {
  return absl::UnavailableError(absl::StrCat(what, " on socket ", socket,
                                             " failed: ", std::strerror(err)));
}

}  // namespace

OwnedFd::~OwnedFd() {
  if (fd_ >= 0) close(fd_);
}

OwnedFd& OwnedFd::operator=(OwnedFd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = other.Release();
  }
  return *this;
}

int OwnedFd::Release() { return std::exchange(fd_, -1); }

absl::Status SendFds(int socket, absl::Span<const int> fds,
                     absl::string_view payload, int64_t timeout_ms) {
  constexpr const char* kWhat = "sending fds";
  if (payload.empty()) {
    return absl::InvalidArgumentError(
        "sending fds: the payload must have at least one byte");
  }
  if (fds.size() > kMaxPassedFds) {
    return absl::InvalidArgumentError(
        absl::StrCat("sending fds: ", fds.size(), " fds, more than the ",
                     kMaxPassedFds, " one message carries"));
  }
  for (int fd : fds) {
    if (fd < 0 || fcntl(fd, F_GETFD) < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("sending fds: fd ", fd, " is not open"));
    }
  }
  if (absl::Status s = CheckUnixSocket(socket, kWhat); !s.ok()) return s;
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  alignas(cmsghdr) char control[kControlBytes] = {};
  size_t sent = 0;
  while (sent < payload.size()) {
    iovec iov{const_cast<char*>(payload.data()) + sent, payload.size() - sent};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (sent == 0 && !fds.empty()) {
      // The descriptors ride with the first byte that leaves.
      msg.msg_control = control;
      msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
      cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
      std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
    }
    const ssize_t n = sendmsg(socket, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (absl::Status s = WaitReady(socket, POLLOUT, deadline, kWhat);
          !s.ok()) {
        return s;
      }
      continue;
    }
    return PeerGone(kWhat, socket, n < 0 ? errno : EPIPE);
  }
  return absl::OkStatus();
}

absl::StatusOr<ReceivedFds> ReceiveFds(int socket, size_t payload_bytes,
                                       size_t max_fds, int64_t timeout_ms) {
  constexpr const char* kWhat = "receiving fds";
  if (payload_bytes == 0) {
    return absl::InvalidArgumentError(
        "receiving fds: the payload must have at least one byte");
  }
  if (absl::Status s = CheckUnixSocket(socket, kWhat); !s.ok()) return s;
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  ReceivedFds out;
  out.payload.resize(payload_bytes);
  size_t got = 0;
  bool truncated = false;
  while (got < payload_bytes) {
    alignas(cmsghdr) char control[kControlBytes];
    iovec iov{out.payload.data() + got, payload_bytes - got};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    const ssize_t n = recvmsg(socket, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (absl::Status s = WaitReady(socket, POLLIN, deadline, kWhat);
          !s.ok()) {
        return s;
      }
      continue;
    }
    if (n < 0) return PeerGone(kWhat, socket, errno);
    // Take ownership of whatever arrived before judging the message.
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr;
         c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        out.fds.emplace_back(fd);
      }
    }
    if ((msg.msg_flags & MSG_CTRUNC) != 0) truncated = true;
    if ((msg.msg_flags & MSG_TRUNC) != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "receiving fds on socket ", socket, ": a message longer than the ",
          payload_bytes, " bytes expected"));
    }
    if (n == 0) {
      return absl::UnavailableError(absl::StrCat(
          "receiving fds on socket ", socket, ": the peer closed it after ",
          got, " of ", payload_bytes, " bytes"));
    }
    got += static_cast<size_t>(n);
  }
  if (truncated || out.fds.size() > max_fds) {
    return absl::InvalidArgumentError(
        absl::StrCat("receiving fds on socket ", socket, ": more than the ",
                     max_fds, " fds expected arrived"));
  }
  return out;
}

}  // namespace zshard::device
