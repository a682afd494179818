// DirLock: flock(LOCK_EX | LOCK_NB) on DIR/coordinator.lock, the holder's
// pid written into the file for the refusal's message.
#include "server/store/dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace zshard::server {
namespace {

// The pid recorded in the lock file, or "unknown".
std::string HolderPid(int fd) {
  char buf[32] = {};
  const ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
  if (n <= 0) return "unknown";
  std::string pid(absl::StripAsciiWhitespace(std::string(buf, n)));
  return pid.empty() ? "unknown" : pid;
}

}  // namespace

std::string DirLock::LockPath(const std::string& dir) {
  return dir + "/coordinator.lock";
}

absl::StatusOr<std::unique_ptr<DirLock>> DirLock::Acquire(
    const std::string& dir) {
  const std::string path = LockPath(dir);
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("cannot open lock file '", path,
                                               "': ", std::strerror(errno)));
  }
  int rc;
  do {
    rc = flock(fd, LOCK_EX | LOCK_NB);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    const int error = errno;
    std::string holder = HolderPid(fd);
    close(fd);
    if (error == EWOULDBLOCK) {
      return absl::FailedPreconditionError(
          absl::StrCat("state dir '", dir,
                       "' is held by another coordinator (pid ", holder, ")"));
    }
    return absl::UnavailableError(
        absl::StrCat("cannot lock '", path, "': ", std::strerror(error)));
  }
  const std::string pid = absl::StrCat(getpid(), "\n");
  if (ftruncate(fd, 0) != 0 || pwrite(fd, pid.data(), pid.size(), 0) !=
                                   static_cast<ssize_t>(pid.size())) {
    const int error = errno;
    close(fd);
    return absl::UnavailableError(absl::StrCat("cannot write lock file '", path,
                                               "': ", std::strerror(error)));
  }
  return std::unique_ptr<DirLock>(new DirLock(fd));
}

DirLock::~DirLock() { close(fd_); }

}  // namespace zshard::server
