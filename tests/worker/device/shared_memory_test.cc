// SharedMemory in one process: a created segment is a zeroed read-write
// memfd of the size asked; a second mapping through its fd shares the bytes
// and owns its own fd; the segment cannot be shrunk; every refusal is one
// line with the right code.
#include "client/worker/device/shared_memory.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace zshard::device {
namespace {

std::string FdTarget(int fd) {
  char target[4096];
  const std::string link = absl::StrCat("/proc/self/fd/", fd);
  const ssize_t n = readlink(link.c_str(), target, sizeof(target) - 1);
  return n > 0 ? std::string(target, static_cast<size_t>(n)) : "";
}

void ExpectOneLine(const absl::Status& s, absl::StatusCode code,
                   const std::string& mentions) {
  EXPECT_EQ(s.code(), code) << s;
  EXPECT_EQ(s.message().find('\n'), absl::string_view::npos) << s;
  EXPECT_NE(s.message().find(mentions), absl::string_view::npos) << s;
}

TEST(SharedMemoryTest, CreatesAZeroedReadWriteMemfdOfTheSizeAsked) {
  constexpr size_t kBytes = 3 * 4096 + 5;
  auto shm = SharedMemory::Create("zshard-unit-param", kBytes);
  ASSERT_TRUE(shm.ok()) << shm.status();
  EXPECT_EQ((*shm)->bytes(), kBytes);
  EXPECT_EQ(reinterpret_cast<uintptr_t>((*shm)->data()) % 4096, 0u);
  const auto* bytes = static_cast<const uint8_t*>((*shm)->data());
  for (size_t i = 0; i < kBytes; ++i) ASSERT_EQ(bytes[i], 0) << i;
  std::memset((*shm)->data(), 0xab, kBytes);
  EXPECT_EQ(FdTarget((*shm)->fd()), "/memfd:zshard-unit-param (deleted)");
  EXPECT_EQ(lseek((*shm)->fd(), 0, SEEK_END), static_cast<off_t>(kBytes));
  EXPECT_NE(fcntl((*shm)->fd(), F_GETFD) & FD_CLOEXEC, 0);
}

TEST(SharedMemoryTest, AMappingThroughTheFdSharesTheBytesAndOwnsItsFd) {
  constexpr size_t kBytes = 2 * 4096;
  auto a = SharedMemory::Create("zshard-unit-grad", kBytes);
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = SharedMemory::Map((*a)->fd(), kBytes);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_NE((*b)->fd(), (*a)->fd());
  EXPECT_NE((*b)->data(), (*a)->data());
  EXPECT_EQ(FdTarget((*b)->fd()), "/memfd:zshard-unit-grad (deleted)");
  static_cast<uint8_t*>((*a)->data())[kBytes - 1] = 7;
  static_cast<uint8_t*>((*b)->data())[0] = 9;
  EXPECT_EQ(static_cast<uint8_t*>((*b)->data())[kBytes - 1], 7);
  EXPECT_EQ(static_cast<uint8_t*>((*a)->data())[0], 9);
  // A smaller mapping of a larger segment is allowed.
  auto prefix = SharedMemory::Map((*a)->fd(), 100);
  ASSERT_TRUE(prefix.ok()) << prefix.status();
  EXPECT_EQ(static_cast<uint8_t*>((*prefix)->data())[0], 9);
  // Each closes only its own fd.
  const int a_fd = (*a)->fd();
  a->reset();
  EXPECT_EQ(static_cast<uint8_t*>((*b)->data())[kBytes - 1], 7);
  EXPECT_GE(fcntl((*b)->fd(), F_GETFD), 0);
  EXPECT_LT(fcntl(a_fd, F_GETFD), 0);
}

TEST(SharedMemoryTest, NoProcessCanShrinkTheSegment) {
  auto shm = SharedMemory::Create("zshard-unit-sealed", 8192);
  ASSERT_TRUE(shm.ok()) << shm.status();
  const int rc = ftruncate((*shm)->fd(), 4096);
  const int err = errno;
  EXPECT_NE(rc, 0);
  EXPECT_EQ(err, EPERM);
  EXPECT_EQ(lseek((*shm)->fd(), 0, SEEK_END), 8192);
}

TEST(SharedMemoryTest, CreateRefusesNamingTheNameAndSize) {
  ExpectOneLine(SharedMemory::Create("zshard-unit-empty", 0).status(),
                absl::StatusCode::kInvalidArgument, "'zshard-unit-empty'");
  ExpectOneLine(SharedMemory::Create(std::string(250, 'n'), 4096).status(),
                absl::StatusCode::kInvalidArgument, "longer than 249");
  ExpectOneLine(SharedMemory::Create(std::string("a\0b", 3), 4096).status(),
                absl::StatusCode::kInvalidArgument, "NUL");
  // More than any address space: sized, but not mapped.
  const size_t huge = size_t{1} << 62;
  ExpectOneLine(SharedMemory::Create("zshard-unit-huge", huge).status(),
                absl::StatusCode::kResourceExhausted,
                absl::StrCat("'zshard-unit-huge' of ", huge, " bytes: mmap"));
  // More than a file can hold: not even sized.
  const size_t too_big = ~size_t{0};
  ExpectOneLine(SharedMemory::Create("zshard-unit-too-big", too_big).status(),
                absl::StatusCode::kResourceExhausted,
                absl::StrCat("'zshard-unit-too-big' of ", too_big, " bytes"));
}

TEST(SharedMemoryTest, MapRefusesWhatItCannotMapSafely) {
  auto shm = SharedMemory::Create("zshard-unit-small", 4096);
  ASSERT_TRUE(shm.ok()) << shm.status();
  const int fd = (*shm)->fd();
  ExpectOneLine(SharedMemory::Map(fd, 0).status(),
                absl::StatusCode::kInvalidArgument, "at least one byte");
  ExpectOneLine(SharedMemory::Map(-1, 4096).status(),
                absl::StatusCode::kInvalidArgument, "fd -1: not an open fd");
  // Past the end a mapping would fault (SIGBUS) on first touch.
  ExpectOneLine(SharedMemory::Map(fd, 4097).status(),
                absl::StatusCode::kInvalidArgument,
                "holds 4096 bytes, fewer than the 4097");
  // Opened read-only: cannot be mapped read-write.
  const int read_only =
      open(absl::StrCat("/proc/self/fd/", fd).c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(read_only, 0);
  ExpectOneLine(SharedMemory::Map(read_only, 4096).status(),
                absl::StatusCode::kInvalidArgument, "mmap failed");
  close(read_only);
  int pipe_fds[2];
  ASSERT_EQ(pipe2(pipe_fds, O_CLOEXEC), 0);
  ExpectOneLine(SharedMemory::Map(pipe_fds[0], 1).status(),
                absl::StatusCode::kInvalidArgument, "fewer than the 1");
  close(pipe_fds[0]);
  close(pipe_fds[1]);
  // A closed fd.
  const int closed = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  close(closed);
  ExpectOneLine(SharedMemory::Map(closed, 4096).status(),
                absl::StatusCode::kInvalidArgument, "not an open fd");
}

}  // namespace
}  // namespace zshard::device
