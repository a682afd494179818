// AtomicFile: stdio writes to PATH.tmp, fsync, rename, fsync of the
// directory, so that a crash leaves either the old file or the new one.
#include "common/checkpoint/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace zshard::checkpoint {
namespace {

absl::Status IoError(absl::string_view what, const std::string& path,
                     int error) {
  const std::string message =
      absl::StrCat("file ", path, ": ", what, ": ", std::strerror(error));
  if (error == EACCES || error == EPERM || error == EROFS) {
    return absl::PermissionDeniedError(message);
  }
  if (error == ENOENT || error == ENOTDIR) {
    return absl::NotFoundError(message);
  }
  return absl::InternalError(message);
}

std::string DirOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

AtomicFile::~AtomicFile() {
  if (file_ != nullptr) std::fclose(file_);
  if (!tmp_.empty() && !committed_) std::remove(tmp_.c_str());
}

absl::Status AtomicFile::Open(const std::string& path) {
  path_ = path;
  tmp_ = path + ".tmp";
  file_ = std::fopen(tmp_.c_str(), "wb");
  if (file_ == nullptr) {
    const int error = errno;
    tmp_.clear();  // nothing of ours to remove
    return IoError("cannot create", path + ".tmp", error);
  }
  return absl::OkStatus();
}

absl::Status AtomicFile::Write(absl::string_view bytes) {
  if (file_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("file ", path_, " is not open"));
  }
  if (!bytes.empty() &&
      std::fwrite(bytes.data(), 1, bytes.size(), file_) != bytes.size()) {
    return IoError("write failed", tmp_, errno);
  }
  bytes_ += static_cast<int64_t>(bytes.size());
  return absl::OkStatus();
}

absl::Status AtomicFile::Commit() {
  if (file_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("file ", path_, " is not open"));
  }
  std::FILE* f = std::exchange(file_, nullptr);
  if (std::fflush(f) != 0 || fsync(fileno(f)) != 0) {
    const int error = errno;
    std::fclose(f);
    return IoError("flush failed", tmp_, error);
  }
  if (std::fclose(f) != 0) return IoError("close failed", tmp_, errno);
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    return IoError("rename failed", tmp_, errno);
  }
  committed_ = true;
  const int dir = open(DirOf(path_).c_str(), O_RDONLY | O_DIRECTORY);
  if (dir >= 0) {
    fsync(dir);
    close(dir);
  }
  return absl::OkStatus();
}

}  // namespace zshard::checkpoint
