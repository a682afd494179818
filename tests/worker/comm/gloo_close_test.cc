// A rank whose run ended closes its Gloo connections without costing a
// slower peer the end of its last message. A completed send means Gloo
// wrote it to the socket, not that the peer read it: closing with a reset
// would drop what the kernel still holds. The receiver runs in a child
// process stopped (SIGSTOP) between posting its receive and reading, so
// the sender's send completes with bytes still queued, and the sender's
// communicator goes away before the receiver reads a byte.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/time/clock.h"
#include "client/worker/comm/communicator.h"
#include "client/worker/comm/file_kv_store.h"
#include "client/worker/comm/gloo_transport.h"
#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

namespace zshard::comm {
namespace {

constexpr uint32_t kTag = 7;
constexpr const char* kGroup = "close";

uint8_t ByteAt(size_t i) { return static_cast<uint8_t>((i * 131 + 7) % 251); }

// Large enough that most of it waits in the sender's socket buffer while
// the receiver is stopped, small enough that the buffer takes all of it
// (Gloo sizes the buffer to the message, up to the kernel's wmem_max).
size_t MessageBytes() {
  size_t wmem_max = 212992;  // Linux's default
  std::ifstream f("/proc/sys/net/core/wmem_max");
  f >> wmem_max;
  return std::min<size_t>(size_t{1} << 20, wmem_max);
}

// The receiving rank, in the child: posts its receive, stops itself, and
// once continued waits for the message. Exit status 0: every byte came.
[[noreturn]] void Receive(const std::string& dir, size_t bytes) {
  FileKvStore store(dir);
  GlooTransport::Options o;
  o.rank = 1;
  o.size = 2;
  o.group = kGroup;
  o.store = &store;
  o.timeout_ms = 10000;
  auto transport = GlooTransport::Connect(o);
  if (!transport.ok()) {
    std::fprintf(stderr, "connect: %s\n",
                 transport.status().ToString().c_str());
    _exit(10);
  }
  std::vector<uint8_t> buf(bytes, 0);
  auto region = (*transport)->Register(buf.data(), buf.size());
  if (!region.ok() || !(*region)->PostRecv(0, kTag, 0, bytes).ok()) {
    _exit(11);
  }
  raise(SIGSTOP);
  absl::Status s = (*region)->WaitRecv(absl::Now() + absl::Seconds(5));
  if (!s.ok()) {
    std::fprintf(stderr, "receiver: %s\n", s.ToString().c_str());
    _exit(12);
  }
  for (size_t i = 0; i < bytes; ++i) {
    if (buf[i] != ByteAt(i)) {
      std::fprintf(stderr, "receiver: byte %zu differs\n", i);
      _exit(13);
    }
  }
  _exit(0);
}

TEST(GlooCloseTest, APeerReadsTheLastMessageAfterTheSenderClosed) {
  ::zshard::testing::TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  const size_t bytes = MessageBytes();
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) Receive(dir.path(), bytes);
  // An assertion that ends the test early leaves no stopped child behind.
  bool reaped = false;
  absl::Cleanup reap = [&] {
    if (reaped) return;
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
  };

  FileKvStore store(dir.path());
  CommOptions o;
  o.rank = 0;
  o.size = 2;
  o.group = kGroup;
  o.store = &store;
  o.timeout_ms = 10000;
  o.host_transport = HostTransport::kTcp;
  auto comm = CreateCommunicator(o);
  ASSERT_TRUE(comm.ok()) << comm.status();
  // The receiver has posted its receive and stopped: it reads nothing now.
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, WUNTRACED), child);
  ASSERT_TRUE(WIFSTOPPED(status)) << status;
  std::vector<uint8_t> data(bytes);
  for (size_t i = 0; i < bytes; ++i) data[i] = ByteAt(i);
  absl::Status sent = (*comm)->Send(1, data.data(), bytes, kTag);
  comm->reset();  // the sender's run ends: its connections close
  kill(child, SIGCONT);
  ASSERT_EQ(waitpid(child, &status, 0), child);
  reaped = true;
  ASSERT_TRUE(sent.ok()) << sent;
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "the receiver lost the message (10: no connect, 11: no post, 12: "
         "its wait failed, 13: bytes differ; its stderr says why)";
}

}  // namespace
}  // namespace zshard::comm
