// zshard_net_probe: a plain TCP server and client for the NetHosts tests,
// run inside a host with its command prefix.
//
//   zshard_net_probe serve HOST PORT SECONDS [BYTES]
//     accepts connections on HOST:PORT for SECONDS, writing "zshard\n" and
//     then BYTES zero bytes (default 0) to each before closing it; exit 0.
//   zshard_net_probe connect HOST PORT TIMEOUT_MS
//     connects within TIMEOUT_MS and reads to the end within TIMEOUT_MS;
//     prints "received N bytes in T ms" and exits 0 when the reply starts
//     with "zshard\n", 1 when the connect or the read fails, 2 on a
//     timeout, 3 on bad usage.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr char kGreeting[] = "zshard\n";

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool Address(const char* host, const char* port, sockaddr_in* addr) {
  *addr = sockaddr_in{};
  addr->sin_family = AF_INET;
  addr->sin_port = htons(static_cast<uint16_t>(std::atoi(port)));
  return inet_pton(AF_INET, host, &addr->sin_addr) == 1;
}

int Serve(const sockaddr_in& addr, int seconds, int64_t bytes) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(fd, 64) != 0) {
    std::fprintf(stderr, "serve: %s\n", std::strerror(errno));
    return 1;
  }
  std::fprintf(stderr, "serving\n");
  const std::vector<char> payload(64 * 1024, 0);
  const int64_t end = NowMs() + int64_t{seconds} * 1000;
  while (NowMs() < end) {
    pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(end - NowMs())) <= 0) continue;
    const int c = accept(fd, nullptr, nullptr);
    if (c < 0) continue;
    bool ok = write(c, kGreeting, sizeof(kGreeting) - 1) > 0;
    for (int64_t left = bytes; ok && left > 0;) {
      const ssize_t n =
          write(c, payload.data(),
                static_cast<size_t>(std::min<int64_t>(left, payload.size())));
      ok = n > 0;
      left -= n;
    }
    close(c);
  }
  close(fd);
  return 0;
}

int Connect(const sockaddr_in& addr, int64_t timeout_ms) {
  const int64_t start = NowMs();
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  fcntl(fd, F_SETFL, O_NONBLOCK);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) !=
          0 &&
      errno != EINPROGRESS) {
    std::fprintf(stderr, "connect: %s\n", std::strerror(errno));
    return 1;
  }
  pollfd p = {fd, POLLOUT, 0};
  if (poll(&p, 1, static_cast<int>(timeout_ms)) <= 0) {
    std::fprintf(stderr, "connect: timed out\n");
    return 2;
  }
  int error = 0;
  socklen_t len = sizeof(error);
  getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len);
  if (error != 0) {
    std::fprintf(stderr, "connect: %s\n", std::strerror(error));
    return 1;
  }
  std::string head;  // the first bytes, for the greeting
  int64_t total = 0;
  char buf[65536];
  const int64_t end = NowMs() + timeout_ms;
  while (true) {
    const int64_t left = end - NowMs();
    pollfd r = {fd, POLLIN, 0};
    if (left <= 0 || poll(&r, 1, static_cast<int>(left)) <= 0) {
      std::fprintf(stderr, "read: timed out after %lld bytes\n",
                   static_cast<long long>(total));
      return 2;
    }
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EAGAIN) continue;
    if (n < 0) {
      std::fprintf(stderr, "read: %s\n", std::strerror(errno));
      return 1;
    }
    if (n == 0) break;
    if (head.size() < 64) head.append(buf, static_cast<size_t>(n));
    total += n;
  }
  close(fd);
  if (head.rfind(kGreeting, 0) != 0) {
    std::fprintf(stderr, "read: unexpected reply\n");
    return 1;
  }
  std::printf("received %lld bytes in %lld ms\n", static_cast<long long>(total),
              static_cast<long long>(NowMs() - start));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  sockaddr_in addr;
  if (argc >= 5 && std::strcmp(argv[1], "serve") == 0 &&
      Address(argv[2], argv[3], &addr)) {
    return Serve(addr, std::atoi(argv[4]),
                 argc >= 6 ? std::atoll(argv[5]) : int64_t{0});
  }
  if (argc == 5 && std::strcmp(argv[1], "connect") == 0 &&
      Address(argv[2], argv[3], &addr)) {
    return Connect(addr, std::atoll(argv[4]));
  }
  std::fprintf(stderr,
               "usage: zshard_net_probe serve HOST PORT SECONDS [BYTES] | "
               "connect HOST PORT TIMEOUT_MS\n");
  return 3;
}
