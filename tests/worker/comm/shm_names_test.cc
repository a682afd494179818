// RemoveStaleShmSegments: a segment whose creator was killed before it
// could unlink it is removed by the next process that connects; those of
// live processes and of other pid namespaces stay.
#include "client/worker/comm/shm_names.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "absl/strings/str_format.h"

namespace zshard::comm {
namespace {

bool Exists(const std::string& name) {
  return access(("/dev/shm" + name).c_str(), F_OK) == 0;
}

std::string Make(uint64_t ns, int pid) {
  const std::string name =
      absl::StrFormat("/zshard-0badc0de-%x-%d-%016x", ns, pid, 0x5eed);
  const int fd = shm_open(name.c_str(), O_CREAT | O_RDWR, 0600);
  EXPECT_GE(fd, 0) << name;
  close(fd);
  return name;
}

TEST(ShmNamesTest, NamesCarryNamespaceAndPid) {
  const std::string name = ShmSegmentName("group");
  EXPECT_EQ(name.rfind("/zshard-", 0), 0u) << name;
  EXPECT_NE(name.find(absl::StrFormat("-%x-%d-", ShmPidNamespace(), getpid())),
            std::string::npos)
      << name;
}

TEST(ShmNamesTest, RemovesOnlySegmentsOfExitedProcessesOfThisNamespace) {
  const uint64_t ns = ShmPidNamespace();
  ASSERT_NE(ns, 0u);
  const pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);  // reaped: the pid is free
  const std::string dead = Make(ns, child);
  const std::string alive = Make(ns, getpid());
  const std::string elsewhere = Make(ns + 1, child);
  ASSERT_TRUE(Exists(dead));
  EXPECT_GE(RemoveStaleShmSegments(), 1);
  EXPECT_FALSE(Exists(dead));
  EXPECT_TRUE(Exists(alive));
  EXPECT_TRUE(Exists(elsewhere));
  shm_unlink(alive.c_str());
  shm_unlink(elsewhere.c_str());
}

}  // namespace
}  // namespace zshard::comm
