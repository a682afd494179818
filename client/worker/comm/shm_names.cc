// ShmSegmentName and RemoveStaleShmSegments.
#include "client/worker/comm/shm_names.h"

#include <dirent.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <functional>
#include <random>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace zshard::comm {
namespace {

constexpr char kPrefix[] = "zshard-";

bool ProcessExited(int64_t pid) {
  return pid > 0 && kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

}  // namespace

uint64_t ShmPidNamespace() {
  char link[64] = {};
  const ssize_t n = readlink("/proc/self/ns/pid", link, sizeof(link) - 1);
  if (n <= 0) return 0;
  absl::string_view text(link, static_cast<size_t>(n));
  uint64_t inode = 0;
  if (!absl::ConsumePrefix(&text, "pid:[") ||
      !absl::ConsumeSuffix(&text, "]") || !absl::SimpleAtoi(text, &inode)) {
    return 0;
  }
  return inode;
}

std::string ShmSegmentName(const std::string& group) {
  std::random_device random;
  const uint64_t nonce = (uint64_t{random()} << 32) | random();
  return absl::StrFormat("/%s%08x-%x-%d-%016x", kPrefix,
                         static_cast<uint32_t>(std::hash<std::string>()(group)),
                         ShmPidNamespace(), getpid(), nonce);
}

int RemoveStaleShmSegments() {
  const uint64_t ns = ShmPidNamespace();
  if (ns == 0) return 0;
  DIR* d = opendir("/dev/shm");
  if (d == nullptr) return 0;
  int removed = 0;
  while (const dirent* e = readdir(d)) {
    absl::string_view name(e->d_name);
    if (!absl::ConsumePrefix(&name, kPrefix)) continue;
    const std::vector<absl::string_view> parts = absl::StrSplit(name, '-');
    uint64_t their_ns = 0;
    int64_t pid = 0;
    if (parts.size() != 4 || !absl::SimpleHexAtoi(parts[1], &their_ns) ||
        their_ns != ns || !absl::SimpleAtoi(parts[2], &pid) ||
        !ProcessExited(pid)) {
      continue;
    }
    if (shm_unlink(absl::StrCat("/", e->d_name).c_str()) == 0) ++removed;
  }
  closedir(d);
  return removed;
}

}  // namespace zshard::comm
