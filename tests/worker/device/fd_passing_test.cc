// SendFds and ReceiveFds over socket pairs: descriptors arrive open,
// close-on-exec and naming the same files; back-to-back messages on one
// stream keep their own descriptors; every wait ends at its deadline;
// a gone peer, a wrong socket and too many descriptors are one-line
// errors, and the surplus descriptors are closed, not leaked.
#include "client/worker/device/fd_passing.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace zshard::device {
namespace {

struct Pair {
  OwnedFd a, b;
};

Pair SocketPair(int type = SOCK_STREAM) {
  int fds[2] = {-1, -1};
  EXPECT_EQ(socketpair(AF_UNIX, type | SOCK_CLOEXEC, 0, fds), 0);
  return {OwnedFd(fds[0]), OwnedFd(fds[1])};
}

// A fresh file (a pipe's read end) to pass around; its inode identifies it.
struct Pipe {
  OwnedFd read, write;
};
Pipe MakePipe() {
  int fds[2] = {-1, -1};
  EXPECT_EQ(pipe2(fds, O_CLOEXEC), 0);
  return {OwnedFd(fds[0]), OwnedFd(fds[1])};
}

ino_t Inode(int fd) {
  struct stat st;
  return fstat(fd, &st) == 0 ? st.st_ino : 0;
}

int OpenFdCount() {
  int n = 0;
  if (DIR* dir = opendir("/proc/self/fd")) {
    while (readdir(dir) != nullptr) ++n;
    closedir(dir);
  }
  return n;
}

TEST(FdPassingTest, DescriptorsArriveOpenCloseOnExecAndTheSame) {
  for (int type : {SOCK_STREAM, SOCK_SEQPACKET}) {
    Pair s = SocketPair(type);
    Pipe p1 = MakePipe();
    Pipe p2 = MakePipe();
    const int fds[] = {p1.read.get(), p2.write.get()};
    ASSERT_TRUE(SendFds(s.a.get(), fds, "hello", 5000).ok());
    auto got = ReceiveFds(s.b.get(), 5, 2, 5000);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->payload, "hello");
    ASSERT_EQ(got->fds.size(), 2u);
    EXPECT_NE(got->fds[0].get(), p1.read.get());
    EXPECT_EQ(Inode(got->fds[0].get()), Inode(p1.read.get()));
    EXPECT_EQ(Inode(got->fds[1].get()), Inode(p2.write.get()));
    EXPECT_NE(fcntl(got->fds[0].get(), F_GETFD) & FD_CLOEXEC, 0);
    // The received write end writes into the original pipe.
    ASSERT_EQ(write(got->fds[1].get(), "x", 1), 1);
    char c = 0;
    ASSERT_EQ(read(p2.read.get(), &c, 1), 1);
    EXPECT_EQ(c, 'x');
  }
}

TEST(FdPassingTest, BackToBackMessagesKeepTheirOwnDescriptors) {
  Pair s = SocketPair();
  Pipe p1 = MakePipe();
  Pipe p2 = MakePipe();
  const int first[] = {p1.read.get()};
  const int second[] = {p2.read.get(), p2.write.get()};
  ASSERT_TRUE(SendFds(s.a.get(), first, "one", 5000).ok());
  ASSERT_TRUE(SendFds(s.a.get(), {}, "plain", 5000).ok());
  ASSERT_TRUE(SendFds(s.a.get(), second, "three", 5000).ok());
  auto one = ReceiveFds(s.b.get(), 3, 1, 5000);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->payload, "one");
  ASSERT_EQ(one->fds.size(), 1u);
  EXPECT_EQ(Inode(one->fds[0].get()), Inode(p1.read.get()));
  auto plain = ReceiveFds(s.b.get(), 5, 0, 5000);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->payload, "plain");
  EXPECT_TRUE(plain->fds.empty());
  auto three = ReceiveFds(s.b.get(), 5, 2, 5000);
  ASSERT_TRUE(three.ok()) << three.status();
  EXPECT_EQ(three->payload, "three");
  ASSERT_EQ(three->fds.size(), 2u);
  EXPECT_EQ(Inode(three->fds[1].get()), Inode(p2.write.get()));
}

TEST(FdPassingTest, AWaitEndsAtItsDeadline) {
  Pair s = SocketPair();
  const auto start = std::chrono::steady_clock::now();
  auto got = ReceiveFds(s.b.get(), 4, 1, 100);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - start)
                      .count();
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDeadlineExceeded)
      << got.status();
  EXPECT_GE(ms, 100);
  EXPECT_LT(ms, 5000);
  // Part of the payload is not enough either.
  ASSERT_TRUE(SendFds(s.a.get(), {}, "ab", 5000).ok());
  got = ReceiveFds(s.b.get(), 4, 1, 100);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDeadlineExceeded)
      << got.status();
}

TEST(FdPassingTest, AGonePeerIsUnavailableNeverSigpipe) {
  Pair s = SocketPair();
  ASSERT_TRUE(SendFds(s.a.get(), {}, "ab", 5000).ok());
  s.a = OwnedFd();
  auto got = ReceiveFds(s.b.get(), 4, 1, 5000);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(got.status().message().find("closed it after 2 of 4 bytes"),
            absl::string_view::npos)
      << got.status();
  // The peer is gone: the send fails instead of killing this process.
  Pipe p = MakePipe();
  const int fds[] = {p.read.get()};
  const absl::Status sent = SendFds(s.b.get(), fds, "x", 5000);
  EXPECT_EQ(sent.code(), absl::StatusCode::kUnavailable) << sent;
}

TEST(FdPassingTest, TooManyDescriptorsAreRefusedAndClosed) {
  Pair s = SocketPair();
  Pipe p = MakePipe();
  const int fds[] = {p.read.get(), p.write.get(), p.read.get()};
  ASSERT_TRUE(SendFds(s.a.get(), fds, "xyz", 5000).ok());
  const int before = OpenFdCount();
  auto got = ReceiveFds(s.b.get(), 3, 2, 5000);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(got.status().message().find("more than the 2 fds"),
            absl::string_view::npos)
      << got.status();
  EXPECT_EQ(OpenFdCount(), before);
}

TEST(FdPassingTest, RefusesBadArgumentsInOneLine) {
  Pair s = SocketPair();
  Pipe p = MakePipe();
  EXPECT_EQ(SendFds(s.a.get(), {}, "", 5000).code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<int> many(kMaxPassedFds + 1, p.read.get());
  EXPECT_EQ(SendFds(s.a.get(), many, "x", 5000).code(),
            absl::StatusCode::kInvalidArgument);
  const int closed[] = {1 << 20};
  absl::Status bad = SendFds(s.a.get(), closed, "x", 5000);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("fd 1048576 is not open"),
            absl::string_view::npos)
      << bad;
  bad = SendFds(p.write.get(), {}, "x", 5000);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("is not a unix domain socket"),
            absl::string_view::npos)
      << bad;
  EXPECT_EQ(ReceiveFds(p.read.get(), 1, 1, 5000).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReceiveFds(s.b.get(), 0, 1, 5000).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(FdPassingTest, OwnedFdClosesOnceAndMoves) {
  Pipe p = MakePipe();
  const int fd = p.read.get();
  OwnedFd moved(std::move(p.read));
  EXPECT_EQ(p.read.get(), -1);
  EXPECT_EQ(moved.get(), fd);
  OwnedFd other;
  other = std::move(moved);
  EXPECT_GE(fcntl(fd, F_GETFD), 0);
  other = OwnedFd();
  EXPECT_LT(fcntl(fd, F_GETFD), 0);
  const int released = p.write.Release();
  EXPECT_GE(fcntl(released, F_GETFD), 0);
  close(released);
}

}  // namespace
}  // namespace zshard::device
