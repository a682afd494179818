// The processes of shared_memory_process_test.cc.
//
//   shm_buffer_peer owner TAG
//     creates two SharedMemory buffers, "zshard-test-TAG-param" and
//     "zshard-test-TAG-grad" (sizes below), fills both, forks and execs
//     "shm_buffer_peer mapper FD" with one end of a Unix socket pair, sends
//     it the grad buffer's fd and size over the socket (SCM_RIGHTS), waits
//     for its answer, checks that the grad buffer now holds the mapper's
//     bytes and the param buffer its own, prints "ready MAPPER_PID" and
//     then waits to be killed (it dies with the test that started it).
//   shm_buffer_peer mapper FD
//     receives the fd, maps it, checks the owner's bytes, overwrites them
//     with its own, answers and then waits on the socket until the owner
//     goes away.
//
// Any failure prints "error MESSAGE" on stdout and exits 1.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/worker/device/fd_passing.h"
#include "client/worker/device/shared_memory.h"
#include "common/status.h"
#include "tests/worker/device/shm_buffer_patterns.h"

namespace zshard::device {
namespace {

constexpr int64_t kTimeoutMs = 30000;

absl::Status RunOwner(const std::string& self, const std::string& tag) {
  ZSHARD_ASSIGN_OR_RETURN(
      auto param,
      SharedMemory::Create(absl::StrCat("zshard-test-", tag, "-param"),
                           kParamBytes));
  ZSHARD_ASSIGN_OR_RETURN(
      auto grad, SharedMemory::Create(
                     absl::StrCat("zshard-test-", tag, "-grad"), kGradBytes));
  FillPattern(param->data(), param->bytes(), kParamSeed);
  FillPattern(grad->data(), grad->bytes(), kOwnerSeed);

  int pair[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
    return absl::InternalError("socketpair failed");
  }
  OwnedFd mine(pair[0]);
  OwnedFd theirs(pair[1]);
  // Everything the child needs is built before fork.
  const std::string fd_arg = std::to_string(theirs.get());
  char* argv[] = {const_cast<char*>(self.c_str()), const_cast<char*>("mapper"),
                  const_cast<char*>(fd_arg.c_str()), nullptr};
  const pid_t child = fork();
  if (child < 0) return absl::InternalError("fork failed");
  if (child == 0) {
    // Only this end crosses exec; the buffers' fds are close-on-exec.
    fcntl(theirs.get(), F_SETFD, 0);
    execv(argv[0], argv);
    _exit(127);
  }
  theirs = OwnedFd();

  uint64_t size = grad->bytes();
  const int fds[] = {grad->fd()};
  ZSHARD_RETURN_IF_ERROR(SendFds(
      mine.get(), fds,
      absl::string_view(reinterpret_cast<const char*>(&size), sizeof(size)),
      kTimeoutMs));
  ZSHARD_ASSIGN_OR_RETURN(ReceivedFds answer,
                          ReceiveFds(mine.get(), 1, 0, kTimeoutMs));
  if (answer.payload != "w") {
    return absl::InternalError(
        absl::StrCat("the mapper answered '", answer.payload, "'"));
  }
  ZSHARD_RETURN_IF_ERROR(
      CheckPattern(grad->data(), grad->bytes(), kMapperSeed, "grad (owner)"));
  ZSHARD_RETURN_IF_ERROR(
      CheckPattern(param->data(), param->bytes(), kParamSeed, "param (owner)"));
  std::printf("ready %d\n", static_cast<int>(child));
  std::fflush(stdout);
  while (true) pause();
}

absl::Status RunMapper(int socket) {
  ZSHARD_ASSIGN_OR_RETURN(ReceivedFds message,
                          ReceiveFds(socket, sizeof(uint64_t), 1, kTimeoutMs));
  if (message.fds.size() != 1) {
    return absl::InternalError(
        absl::StrCat("the mapper got ", message.fds.size(), " fds, not 1"));
  }
  uint64_t size = 0;
  std::memcpy(&size, message.payload.data(), sizeof(size));
  ZSHARD_ASSIGN_OR_RETURN(auto grad,
                          SharedMemory::Map(message.fds[0].get(), size));
  // Map dups: the received fd may go.
  message.fds.clear();
  ZSHARD_RETURN_IF_ERROR(
      CheckPattern(grad->data(), grad->bytes(), kOwnerSeed, "grad (mapper)"));
  FillPattern(grad->data(), grad->bytes(), kMapperSeed);
  ZSHARD_RETURN_IF_ERROR(SendFds(socket, {}, "w", kTimeoutMs));
  // Holds the mapping until killed; the owner's end closing ends the wait.
  char byte;
  while (recv(socket, &byte, 1, 0) > 0) {
  }
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  absl::Status s;
  if (argc == 3 && std::string(argv[1]) == "owner") {
    // Dies with the test that started it, whatever happens to the test.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    s = RunOwner(argv[0], argv[2]);
  } else if (int fd = -1; argc == 3 && std::string(argv[1]) == "mapper" &&
                          absl::SimpleAtoi(argv[2], &fd)) {
    s = RunMapper(fd);
  } else {
    s = absl::InvalidArgumentError(
        "usage: shm_buffer_peer owner TAG | mapper FD");
  }
  if (s.ok()) return 0;
  std::printf("error %s\n", std::string(s.message()).c_str());
  return 1;
}

}  // namespace
}  // namespace zshard::device

int main(int argc, char** argv) { return zshard::device::Main(argc, argv); }
