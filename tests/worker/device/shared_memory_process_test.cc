// SharedMemory across real processes: shm_buffer_peer's owner creates two
// buffers and hands one to a forked and exec'd mapper over a Unix socket
// (SCM_RIGHTS); the mapper's bytes show in the owner's mapping. Then both
// are killed with SIGKILL: nothing of theirs is in /dev/shm (before, during
// or after), no process holds or maps the segments any more, and the
// system's shared memory drops by what the buffers took.
#include <dirent.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/wait_for.h"
#include "tests/worker/device/shm_buffer_patterns.h"

namespace zshard::device {
namespace {

using ::zshard::testing::Subprocess;
using ::zshard::testing::TempDir;
using ::zshard::testing::WaitFor;

std::string PeerBinary() {
  char path[4096];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) return "shm_buffer_peer";
  std::string self(path, static_cast<size_t>(n));
  return self.substr(0, self.rfind('/') + 1) + "shm_buffer_peer";
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::set<std::string> DevShmEntries() {
  std::set<std::string> names;
  if (DIR* dir = opendir("/dev/shm")) {
    while (const dirent* e = readdir(dir)) {
      const std::string name = e->d_name;
      if (name != "." && name != "..") names.insert(name);
    }
    closedir(dir);
  }
  return names;
}

// The system's shared memory (memfd and tmpfs pages), KiB.
int64_t ShmemKiB() {
  std::istringstream in(ReadFile("/proc/meminfo"));
  std::string key;
  int64_t value = 0;
  std::string unit;
  while (in >> key >> value) {
    if (key == "Shmem:") return value;
    std::getline(in, unit);
  }
  return -1;
}

// Targets of /proc/PID/fd/* for one process.
std::vector<std::string> FdTargets(pid_t pid) {
  std::vector<std::string> targets;
  const std::string dir_path = absl::StrCat("/proc/", pid, "/fd");
  if (DIR* dir = opendir(dir_path.c_str())) {
    while (const dirent* e = readdir(dir)) {
      char target[4096];
      const std::string link = dir_path + "/" + e->d_name;
      const ssize_t n = readlink(link.c_str(), target, sizeof(target) - 1);
      if (n > 0) targets.emplace_back(target, static_cast<size_t>(n));
    }
    closedir(dir);
  }
  return targets;
}

// "PID fd|maps" for every process this user may read that holds or maps
// something whose name contains `needle`.
std::vector<std::string> Holders(const std::string& needle) {
  std::vector<std::string> found;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return found;
  while (const dirent* e = readdir(proc)) {
    int pid = 0;
    if (!absl::SimpleAtoi(e->d_name, &pid)) continue;
    for (const std::string& t : FdTargets(pid)) {
      if (absl::StrContains(t, needle))
        found.push_back(absl::StrCat(pid, " fd"));
    }
    if (absl::StrContains(ReadFile(absl::StrCat("/proc/", pid, "/maps")),
                          needle)) {
      found.push_back(absl::StrCat(pid, " maps"));
    }
  }
  closedir(proc);
  return found;
}

TEST(SharedMemoryProcessTest, AChildWritesTheParentSeesNothingOutlivesSigkill) {
  // The mapper outlives the owner's SIGKILL by a moment: it comes back to
  // this process to be reaped.
  ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  const std::string tag =
      absl::StrCat(getpid(), "-", std::random_device{}() % 1000000);
  const std::string segment = absl::StrCat("memfd:zshard-test-", tag, "-");
  const int64_t total_kib =
      static_cast<int64_t>(kParamBytes + kGradBytes) >> 10;
  // Other processes (tests run in parallel) may take or give back some
  // shared memory meanwhile, and the kernel's counters lag per cpu: a
  // quarter of the buffers' size is the margin.
  const int64_t margin_kib = total_kib / 4;

  const std::set<std::string> shm_before = DevShmEntries();
  const int64_t shmem_before = ShmemKiB();
  ASSERT_GE(shmem_before, 0);

  Subprocess::Options o;
  o.argv = {PeerBinary(), "owner", tag};
  o.stdout_path = dir.File("owner.out");
  auto owner = Subprocess::Start(o);
  ASSERT_TRUE(owner.ok()) << owner.status();
  std::string out;
  ASSERT_TRUE(WaitFor(
      [&] {
        out = ReadFile(o.stdout_path);
        return absl::StrContains(out, "\n") || !(*owner)->Running();
      },
      60000))
      << "the owner said nothing within 60 s";
  int mapper = 0;
  ASSERT_TRUE(
      absl::StartsWith(out, "ready ") &&
      absl::SimpleAtoi(absl::StripAsciiWhitespace(out.substr(6)), &mapper))
      << out;

  // Alive: both processes hold memfd segments, nothing is in /dev/shm.
  const std::vector<std::string> owner_fds = FdTargets((*owner)->pid());
  EXPECT_EQ(std::count(owner_fds.begin(), owner_fds.end(),
                       "/" + segment + "param (deleted)"),
            1)
      << absl::StrJoin(owner_fds, ", ");
  EXPECT_EQ(std::count(owner_fds.begin(), owner_fds.end(),
                       "/" + segment + "grad (deleted)"),
            1)
      << absl::StrJoin(owner_fds, ", ");
  EXPECT_TRUE(
      absl::StrContains(ReadFile(absl::StrCat("/proc/", mapper, "/maps")),
                        "/" + segment + "grad"));
  for (const std::string& name : DevShmEntries()) {
    EXPECT_FALSE(absl::StrContains(name, tag)) << name;
  }
  const int64_t shmem_alive = ShmemKiB();
  EXPECT_GE(shmem_alive - shmem_before, total_kib - margin_kib)
      << "before " << shmem_before << " KiB, alive " << shmem_alive << " KiB";

  // SIGKILL both, the mapper first (still waiting on its socket).
  ASSERT_EQ(kill(mapper, SIGKILL), 0);
  (*owner)->Signal(SIGKILL);
  EXPECT_EQ((*owner)->Wait(20000), 128 + SIGKILL);
  int status = 0;
  ASSERT_TRUE(WaitFor(
      [&] { return waitpid(mapper, &status, WNOHANG) == mapper; }, 20000))
      << "mapper " << mapper << " was not reaped";
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;

  // After: no new /dev/shm entry of theirs, no holder, the memory is back.
  for (const std::string& name : DevShmEntries()) {
    if (shm_before.count(name) != 0) continue;
    EXPECT_FALSE(
        absl::StrContains(name, tag) ||
        absl::StrContains(name, absl::StrCat("-", mapper, "-")) ||
        absl::StrContains(name, absl::StrCat("-", (*owner)->pid(), "-")))
        << "left in /dev/shm: " << name;
  }
  EXPECT_TRUE(Holders(segment).empty())
      << absl::StrJoin(Holders(segment), ", ");
  const int64_t shmem_after = ShmemKiB();
  EXPECT_GE(shmem_alive - shmem_after, total_kib - margin_kib)
      << "alive " << shmem_alive << " KiB, after " << shmem_after << " KiB";
}

}  // namespace
}  // namespace zshard::device
