// SharedMemory: memfd_create, a shrink seal, ftruncate and mmap.
#include "client/worker/device/shared_memory.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"

namespace zshard::device {
namespace {

std::string Describe(absl::string_view name, size_t bytes) {
  return absl::StrCat("shared memory '", name, "' of ", bytes, " bytes");
}

absl::Status Exhausted(absl::string_view name, size_t bytes, const char* what,
                       int err) {
  return absl::ResourceExhaustedError(absl::StrCat(
      Describe(name, bytes), ": ", what, " failed: ", std::strerror(err)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<SharedMemory>> SharedMemory::Create(
    absl::string_view name, size_t bytes) {
  if (bytes == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shared memory '", name, "': size must be at least one byte"));
  }
  if (name.size() > kMaxNameBytes ||
      name.find('\0') != absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("shared memory name '", name, "' is longer than ",
                     kMaxNameBytes, " bytes or holds a NUL"));
  }
  if (bytes > static_cast<uint64_t>(std::numeric_limits<off_t>::max())) {
    return Exhausted(name, bytes, "sizing", EFBIG);
  }
  const std::string c_name(name);
  const int fd = memfd_create(c_name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return Exhausted(name, bytes, "memfd_create", errno);
  auto fail = [&](const char* what) {
    const int err = errno;
    close(fd);
    return Exhausted(name, bytes, what, err);
  };
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) return fail("ftruncate");
  // No process that maps the segment may shrink it under the others' feet
  // (their accesses past the new end would raise SIGBUS).
  if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_SEAL) != 0) {
    return fail("sealing");
  }
  void* data = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) return fail("mmap");
  return std::unique_ptr<SharedMemory>(new SharedMemory(fd, data, bytes));
}

absl::StatusOr<std::unique_ptr<SharedMemory>> SharedMemory::Map(int fd,
                                                                size_t bytes) {
  const std::string what = absl::StrCat("mapping fd ", fd);
  if (bytes == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": size must be at least one byte"));
  }
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": not an open fd"));
  }
  if (st.st_size < 0 || static_cast<uint64_t>(st.st_size) < bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": it holds ", st.st_size, " bytes, fewer than the ",
                     bytes, " to map"));
  }
  const int own = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (own < 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat(what, ": dup failed: ", std::strerror(errno)));
  }
  void* data = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, own, 0);
  if (data == MAP_FAILED) {
    const int err = errno;
    close(own);
    const std::string message = absl::StrCat(
        what, " of ", bytes, " bytes: mmap failed: ", std::strerror(err));
    if (err == ENOMEM) return absl::ResourceExhaustedError(message);
    return absl::InvalidArgumentError(absl::StrCat(
        message, " (it must be a file opened read-write that can be shared)"));
  }
  return std::unique_ptr<SharedMemory>(new SharedMemory(own, data, bytes));
}

SharedMemory::~SharedMemory() {
  munmap(data_, bytes_);
  close(fd_);
}

}  // namespace zshard::device
