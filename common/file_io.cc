#include "common/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace zshard {

absl::StatusOr<std::string> ReadFile(absl::string_view path) {
  std::string p(path);
  struct stat st;
  if (::stat(p.c_str(), &st) != 0) {
    if (errno == ENOENT) {
      return absl::NotFoundError(absl::StrCat("file '", p, "' does not exist"));
    }
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read '", p, "': ", std::strerror(errno)));
  }
  if (S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", p, "' is a directory, not a file"));
  }
  std::ifstream in(p, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read '", p, "': ", std::strerror(errno)));
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) {
    return absl::InvalidArgumentError(absl::StrCat("error reading '", p, "'"));
  }
  return ss.str();
}

absl::Status WriteFileAtomic(absl::string_view path,
                             absl::string_view contents) {
  std::string p(path);
  std::string tmp = p + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot write '", tmp, "': ", std::strerror(errno)));
    }
    out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
    if (!out) {
      return absl::InternalError(absl::StrCat("short write to '", tmp, "'"));
    }
  }
  if (std::rename(tmp.c_str(), p.c_str()) != 0) {
    return absl::InternalError(
        absl::StrCat("cannot rename '", tmp, "': ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status EnsureWritableDir(absl::string_view path) {
  const std::string p(path);
  std::error_code ec;
  std::filesystem::create_directories(p, ec);
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat("directory '", p, "' cannot be created: ", ec.message()));
  }
  if (!std::filesystem::is_directory(p, ec)) {
    return absl::FailedPreconditionError(
        absl::StrCat("'", p, "' is not a directory"));
  }
  const std::string probe = absl::StrCat(p, "/.zshard-probe-", getpid());
  const int fd =
      open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "directory '", p, "' is not writable: ", std::strerror(errno)));
  }
  close(fd);
  unlink(probe.c_str());
  return absl::OkStatus();
}

}  // namespace zshard
