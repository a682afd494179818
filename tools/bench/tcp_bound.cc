// Loopback TCP bounds: one stream, and a full mesh moving a reduce-scatter's
// bytes between forked processes.
#include "tools/bench/tcp_bound.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tools/bench/forked_ranks.h"

namespace zshard::bench {
namespace {

double Since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

// A listening socket on 127.0.0.1 with an ephemeral port; -1 on failure.
int Listen(sockaddr_in* addr) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  *addr = sockaddr_in{};
  addr->sin_family = AF_INET;
  addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(*addr);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(addr), len) != 0 ||
      listen(fd, 64) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(addr), &len) != 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  return fd;
}

bool WriteAll(int fd, const void* data, size_t bytes) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = write(fd, p, bytes);
    if (n <= 0) return false;
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

bool ReadAll(int fd, void* data, size_t bytes) {
  char* p = static_cast<char*>(data);
  while (bytes > 0) {
    const ssize_t n = read(fd, p, bytes);
    if (n <= 0) return false;
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

// Connects rank `rank` to every peer: it dials lower ranks (announcing
// itself with 4 bytes) and accepts higher ones. Returns fds by peer rank.
bool ConnectMesh(int rank, int ranks, const std::vector<int>& listeners,
                 const std::vector<sockaddr_in>& addrs, std::vector<int>* fds) {
  fds->assign(ranks, -1);
  for (int p = 0; p < rank; ++p) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 ||
        connect(fd, reinterpret_cast<const sockaddr*>(&addrs[p]),
                sizeof(addrs[p])) != 0 ||
        !WriteAll(fd, &rank, sizeof(rank))) {
      return false;
    }
    (*fds)[p] = fd;
  }
  for (int k = rank + 1; k < ranks; ++k) {
    const int fd = accept(listeners[rank], nullptr, nullptr);
    int peer = -1;
    if (fd < 0 || !ReadAll(fd, &peer, sizeof(peer)) || peer <= rank ||
        peer >= ranks) {
      return false;
    }
    (*fds)[peer] = fd;
  }
  const int one = 1;
  for (int p = 0; p < ranks; ++p) {
    if (p != rank) {
      setsockopt((*fds)[p], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
  }
  return true;
}

// One byte to and from every peer.
bool Barrier(int rank, const std::vector<int>& fds) {
  char b = 0;
  for (size_t p = 0; p < fds.size(); ++p) {
    if (static_cast<int>(p) != rank && !WriteAll(fds[p], &b, 1)) return false;
  }
  for (size_t p = 0; p < fds.size(); ++p) {
    if (static_cast<int>(p) != rank && !ReadAll(fds[p], &b, 1)) return false;
  }
  return true;
}

// One round: every peer gets `bytes` from `src` and sends `bytes` into a
// window. Returns false on a socket error or 10 s without progress.
bool ExchangeRound(int rank, const std::vector<int>& fds, size_t bytes,
                   const std::vector<char>& src, std::vector<char>* window,
                   size_t window_bytes) {
  const int ranks = static_cast<int>(fds.size());
  std::vector<size_t> sent(ranks, 0), got(ranks, 0);
  int open = 2 * (ranks - 1);
  std::vector<pollfd> polls;
  std::vector<int> peers;
  while (open > 0) {
    polls.clear();
    peers.clear();
    for (int p = 0; p < ranks; ++p) {
      if (p == rank) continue;
      short events = 0;
      if (sent[p] < bytes) events |= POLLOUT;
      if (got[p] < bytes) events |= POLLIN;
      if (events != 0) {
        polls.push_back({fds[p], events, 0});
        peers.push_back(p);
      }
    }
    if (poll(polls.data(), polls.size(), 10000) <= 0) return false;
    for (size_t i = 0; i < polls.size(); ++i) {
      const int p = peers[i];
      if ((polls[i].revents & (POLLERR | POLLHUP)) != 0) return false;
      if ((polls[i].revents & POLLOUT) != 0 && sent[p] < bytes) {
        const ssize_t n = send(fds[p], src.data() + p * bytes + sent[p],
                               bytes - sent[p], MSG_DONTWAIT);
        if (n > 0) {
          sent[p] += static_cast<size_t>(n);
          open -= sent[p] == bytes;
        }
      }
      if ((polls[i].revents & POLLIN) != 0 && got[p] < bytes) {
        const ssize_t n =
            recv(fds[p], window->data() + p * window_bytes,
                 std::min(window_bytes, bytes - got[p]), MSG_DONTWAIT);
        if (n == 0) return false;
        if (n > 0) {
          got[p] += static_cast<size_t>(n);
          open -= got[p] == bytes;
        }
      }
    }
  }
  return true;
}

// One rank's whole run: its round times, or Unavailable.
absl::StatusOr<RankReport> RunMeshRank(int rank, int ranks, size_t bytes,
                                       int iters,
                                       const std::vector<int>& listeners,
                                       const std::vector<sockaddr_in>& addrs) {
  constexpr size_t kWindow = size_t{256} << 10;
  const absl::Status failed = absl::UnavailableError(absl::StrCat(
      "tcp mesh bound: rank ", rank, " failed to connect or exchange"));
  std::vector<int> fds;
  if (!ConnectMesh(rank, ranks, listeners, addrs, &fds)) return failed;
  std::vector<char> src(bytes * ranks, 1);
  std::vector<char> window(kWindow * ranks);
  RankReport report;
  for (int it = -1; it < iters; ++it) {  // one warm-up
    if (!Barrier(rank, fds)) return failed;
    const auto start = std::chrono::steady_clock::now();
    if (!ExchangeRound(rank, fds, bytes, src, &window, kWindow)) return failed;
    if (it >= 0) report.times.push_back(Since(start));
  }
  return report;
}

}  // namespace

double MeasureTcpStream(size_t total) {
  sockaddr_in addr;
  const int server = Listen(&addr);
  if (server < 0) return 0;
  std::thread receiver([&] {
    const int c = accept(server, nullptr, nullptr);
    if (c < 0) return;
    std::vector<char> buf(size_t{8} << 20);
    size_t got = 0;
    while (got < total) {
      const ssize_t n = recv(c, buf.data(), buf.size(), 0);
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    close(c);
  });
  const int s = socket(AF_INET, SOCK_STREAM, 0);
  std::vector<char> buf(size_t{8} << 20, 1);
  bool ok = s >= 0 &&
            connect(s, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  const auto start = std::chrono::steady_clock::now();
  for (size_t sent = 0; ok && sent < total;) {
    const ssize_t n =
        send(s, buf.data(), std::min(buf.size(), total - sent), 0);
    ok = n > 0;
    sent += ok ? static_cast<size_t>(n) : 0;
  }
  if (s >= 0) close(s);
  receiver.join();
  const double t = Since(start);
  close(server);
  return ok ? static_cast<double>(total) / t : 0;
}

absl::StatusOr<double> MeasureTcpMeshBound(int ranks, size_t bytes_per_peer,
                                           int iters) {
  if (ranks < 2 || bytes_per_peer == 0 || iters < 1) {
    return absl::InvalidArgumentError(
        "tcp mesh bound: needs 2 or more ranks, bytes and iterations");
  }
  std::vector<int> listeners(ranks, -1);
  std::vector<sockaddr_in> addrs(ranks);
  auto close_all = [&] {
    for (int fd : listeners) {
      if (fd >= 0) close(fd);
    }
  };
  for (int r = 0; r < ranks; ++r) {
    listeners[r] = Listen(&addrs[r]);
    if (listeners[r] < 0) {
      close_all();
      return absl::UnavailableError("tcp mesh bound: cannot listen");
    }
  }
  absl::StatusOr<std::vector<RankReport>> reports =
      RunForkedRanks(ranks, [&](int r) {
        return RunMeshRank(r, ranks, bytes_per_peer, iters, listeners, addrs);
      });
  close_all();
  if (!reports.ok()) return reports.status();
  std::vector<std::vector<double>> times;
  for (RankReport& report : *reports) {
    if (report.times.size() != static_cast<size_t>(iters)) {
      return absl::UnavailableError(
          "tcp mesh bound: a rank reported too few times");
    }
    times.push_back(std::move(report.times));
  }
  const double median = MedianOfSlowest(times, 0, iters);
  return static_cast<double>(ranks - 1) * bytes_per_peer / median;
}

}  // namespace zshard::bench
