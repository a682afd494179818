// RunForkedRanks: fork, report over a pipe as text, gather.
#include "tools/bench/forked_ranks.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace zshard::bench {
namespace {

// "ok <label or -> t0 t1 ..." or "error <message>".
std::string Encode(const absl::StatusOr<RankReport>& report) {
  if (!report.ok()) return absl::StrCat("error ", report.status().ToString());
  std::string msg =
      absl::StrCat("ok ", report->label.empty() ? "-" : report->label);
  for (double t : report->times) absl::StrAppend(&msg, " ", t);
  return msg;
}

bool Decode(const std::string& msg, RankReport* report) {
  if (msg.rfind("ok ", 0) != 0) return false;
  const size_t label_end = std::min(msg.find(' ', 3), msg.size());
  report->label = msg.substr(3, label_end - 3);
  if (report->label == "-") report->label.clear();
  const char* p = msg.c_str() + label_end;
  char* end = nullptr;
  for (double t = std::strtod(p, &end); end != p; t = std::strtod(p, &end)) {
    report->times.push_back(t);
    p = end;
  }
  return true;
}

void WriteAll(int fd, const std::string& msg) {
  for (size_t off = 0; off < msg.size();) {
    const ssize_t w = write(fd, msg.data() + off, msg.size() - off);
    if (w <= 0) return;
    off += static_cast<size_t>(w);
  }
}

std::string ReadAll(int fd) {
  std::string msg;
  char buf[4096];
  ssize_t got;
  while ((got = read(fd, buf, sizeof(buf))) > 0) {
    msg.append(buf, static_cast<size_t>(got));
  }
  return msg;
}

}  // namespace

absl::StatusOr<std::vector<RankReport>> RunForkedRanks(
    int ranks, const std::function<absl::StatusOr<RankReport>(int)>& body) {
  std::vector<pid_t> pids;
  std::vector<int> fds;
  absl::Status result;
  for (int r = 0; r < ranks && result.ok(); ++r) {
    int p[2];
    if (pipe(p) != 0) {
      result = absl::InternalError("pipe failed");
      break;
    }
    const pid_t pid = fork();
    if (pid == 0) {
      close(p[0]);
      const absl::StatusOr<RankReport> report = body(r);
      WriteAll(p[1], Encode(report));
      _exit(report.ok() ? 0 : 1);
    }
    close(p[1]);
    if (pid < 0) {
      close(p[0]);
      result = absl::InternalError("fork failed");
      break;
    }
    pids.push_back(pid);
    fds.push_back(p[0]);
  }
  // Started ranks are always reaped, even after a failed fork.
  std::vector<RankReport> reports(pids.size());
  for (size_t r = 0; r < pids.size(); ++r) {
    const std::string msg = ReadAll(fds[r]);
    close(fds[r]);
    waitpid(pids[r], nullptr, 0);
    if (!Decode(msg, &reports[r]) && result.ok()) {
      result = absl::UnavailableError(absl::StrCat(
          "rank ", r, " process failed: ", msg.empty() ? "no report" : msg));
    }
  }
  if (!result.ok()) return result;
  return reports;
}

double MedianOfSlowest(const std::vector<std::vector<double>>& times,
                       size_t first, size_t count) {
  std::vector<double> slowest(count, 0);
  for (const std::vector<double>& rank : times) {
    for (size_t i = 0; i < count; ++i) {
      slowest[i] = std::max(slowest[i], rank[first + i]);
    }
  }
  std::sort(slowest.begin(), slowest.end());
  return slowest[count / 2];
}

}  // namespace zshard::bench
