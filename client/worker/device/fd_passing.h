// Passing open file descriptors between processes over a connected Unix
// domain socket (SCM_RIGHTS), with a payload of bytes the receiver knows the
// size of: how a shared buffer's memfd reaches the process that maps it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace zshard::device {

// An owned file descriptor: closed when the object goes away. Move-only;
// -1 when empty.
class OwnedFd {
 public:
  OwnedFd() = default;
  explicit OwnedFd(int fd) : fd_(fd) {}
  ~OwnedFd();
  OwnedFd(OwnedFd&& other) noexcept : fd_(other.Release()) {}
  OwnedFd& operator=(OwnedFd&& other) noexcept;
  OwnedFd(const OwnedFd&) = delete;
  OwnedFd& operator=(const OwnedFd&) = delete;

  int get() const { return fd_; }
  // Gives the descriptor up without closing it; the object becomes empty.
  int Release();

 private:
  int fd_ = -1;
};

// The most descriptors one message may carry.
inline constexpr size_t kMaxPassedFds = 16;

// Sends `payload` (at least one byte) over the connected Unix socket
// `socket` (SOCK_STREAM or SOCK_SEQPACKET), with `fds` (at most
// kMaxPassedFds, each open; the caller keeps its own) attached to its first
// byte. Blocks until every byte is queued or `timeout_ms` passes
// (DeadlineExceeded). InvalidArgument for an empty payload, too many fds or
// a socket that is not a Unix socket; Unavailable when the peer has gone
// (never SIGPIPE).
absl::Status SendFds(int socket, absl::Span<const int> fds,
                     absl::string_view payload, int64_t timeout_ms);

// What ReceiveFds got: the payload and the descriptors that came with it,
// opened close-on-exec in this process.
struct ReceivedFds {
  std::string payload;
  std::vector<OwnedFd> fds;
};

// Receives exactly `payload_bytes` (>= 1) bytes from `socket` and every
// descriptor attached to them (at most `max_fds`), reading no byte past
// them, so that consecutive messages of known sizes can share one stream.
// Blocks until then or `timeout_ms` passes (DeadlineExceeded). Unavailable
// when the peer closes first; InvalidArgument when more than `max_fds`
// descriptors arrive (every one of them is closed).
absl::StatusOr<ReceivedFds> ReceiveFds(int socket, size_t payload_bytes,
                                       size_t max_fds, int64_t timeout_ms);

}  // namespace zshard::device
