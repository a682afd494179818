// Host buffers another process can map: one anonymous memfd segment per
// buffer. A memfd has no name in any file system (it never appears in
// /dev/shm), so its memory goes back to the system when the last process
// holding its fd or a mapping of it exits, however it exits (SIGKILL
// included): nothing is ever left behind to clean up.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace zshard::device {

// One mapped segment. Thread-compatible; owns the mapping and its fd (the
// fd is close-on-exec: hand it to another process over a Unix socket with
// SendFds, not through exec).
class SharedMemory {
 public:
  // A new anonymous memfd segment of `bytes` bytes, mapped read-write and
  // zeroed; `name` is the memfd's name (shows in /proc/PID/fd as
  // "/memfd:NAME (deleted)"; at most kMaxNameBytes bytes). Pages are taken
  // from the system on first touch, as for an anonymous allocation.
  // ResourceExhausted (one line naming the name and size) when it cannot be
  // sized or mapped; InvalidArgument for bytes == 0 or a name too long.
  static absl::StatusOr<std::unique_ptr<SharedMemory>> Create(
      absl::string_view name, size_t bytes);

  // Maps a segment another process handed over (e.g. by SCM_RIGHTS);
  // dups `fd`, so the caller keeps its own. InvalidArgument when `fd` is
  // not open, cannot be mapped shared read-write, holds fewer than `bytes`
  // bytes, or bytes == 0; ResourceExhausted when the mapping fails for
  // want of memory or address space.
  static absl::StatusOr<std::unique_ptr<SharedMemory>> Map(int fd,
                                                           size_t bytes);

  // The longest memfd name Linux takes.
  static constexpr size_t kMaxNameBytes = 249;

  ~SharedMemory();  // unmaps and closes its fd
  SharedMemory(const SharedMemory&) = delete;
  SharedMemory& operator=(const SharedMemory&) = delete;

  // The mapping: bytes() bytes, page aligned, valid until destruction.
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  // This object's fd of the segment (valid until destruction).
  int fd() const { return fd_; }

 private:
  SharedMemory(int fd, void* data, size_t bytes)
      : fd_(fd), data_(data), bytes_(bytes) {}

  const int fd_;
  void* const data_;
  const size_t bytes_;
};

}  // namespace zshard::device
