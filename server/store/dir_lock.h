// DirLock: one process per state directory. The embedded store takes an
// exclusive flock on DIR/coordinator.lock for the life of the process, so a
// second coordinator on the same directory (an old pod still running beside
// its replacement) is refused instead of sharing the SQLite file.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace zshard::server {

// An exclusive lock on a directory. Not copyable; released (and the
// descriptor closed) when destroyed or when the process dies, whatever
// kills it: the kernel drops flock locks with the last descriptor.
class DirLock {
 public:
  // Takes the lock on `dir` (which must exist) without waiting and writes
  // this process's pid into the lock file. FailedPrecondition naming the
  // holder's pid when another process holds it; Unavailable when the lock
  // file cannot be created.
  static absl::StatusOr<std::unique_ptr<DirLock>> Acquire(
      const std::string& dir);

  ~DirLock();
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

  // DIR/coordinator.lock.
  static std::string LockPath(const std::string& dir);

 private:
  explicit DirLock(int fd) : fd_(fd) {}
  int fd_;
};

}  // namespace zshard::server
