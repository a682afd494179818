// The shm transport across real processes: three comm_shm_peer processes
// all-reduce in a loop; a clean run leaves nothing in /dev/shm, and after a
// SIGKILL of one rank the survivors fail with Unavailable well within the
// timeout, again leaving nothing behind; so does a rank killed inside the
// rendezvous.
#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/worker/comm/communicator.h"
#include "client/worker/comm/file_kv_store.h"
#include "gtest/gtest.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/temp_dir.h"

namespace zshard::comm {
namespace {

using ::zshard::testing::Subprocess;
using ::zshard::testing::TempDir;

constexpr int kRanks = 3;

// comm_shm_peer sits next to this test's binary.
std::string PeerBinary() {
  char path[4096];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) return "comm_shm_peer";
  std::string self(path, static_cast<size_t>(n));
  return self.substr(0, self.rfind('/') + 1) + "comm_shm_peer";
}

// Entries of /dev/shm made by process `pid` (segment names carry it).
std::vector<std::string> SegmentsOf(pid_t pid) {
  std::vector<std::string> found;
  DIR* dir = opendir("/dev/shm");
  if (dir == nullptr) return found;
  const std::string mark = absl::StrCat("-", pid, "-");
  while (const dirent* e = readdir(dir)) {
    const std::string name = e->d_name;
    if (name.rfind("zshard-", 0) == 0 && name.find(mark) != std::string::npos) {
      found.push_back(name);
    }
  }
  closedir(dir);
  return found;
}

class ShmProcessTest : public ::testing::Test {
 protected:
  void Start(int64_t iterations) {
    ASSERT_FALSE(dir_.path().empty());
    for (int r = 0; r < kRanks; ++r) {
      Subprocess::Options o;
      o.argv = {PeerBinary(),
                dir_.path(),
                std::to_string(r),
                std::to_string(kRanks),
                std::to_string(iterations),
                "20000"};
      o.stderr_path = dir_.File(absl::StrCat("rank", r, ".err"));
      auto child = Subprocess::Start(o);
      ASSERT_TRUE(child.ok()) << child.status();
      children_.push_back(std::move(child).value());
    }
  }

  // The "<code> <ms>" a rank reported at its end.
  void ExpectResult(int rank, absl::StatusCode code, int64_t max_ms) {
    auto value = store_.Get(absl::StrCat("result/", rank), 20000);
    ASSERT_TRUE(value.ok()) << "rank " << rank << ": " << value.status();
    std::vector<std::string> parts = absl::StrSplit(*value, ' ');
    ASSERT_EQ(parts.size(), 2u) << *value;
    int got = 0;
    int64_t ms = 0;
    ASSERT_TRUE(absl::SimpleAtoi(parts[0], &got) &&
                absl::SimpleAtoi(parts[1], &ms));
    EXPECT_EQ(static_cast<absl::StatusCode>(got), code) << "rank " << rank;
    EXPECT_LT(ms, max_ms) << "rank " << rank;
  }

  void ExpectNoSegments() {
    for (const auto& child : children_) {
      EXPECT_TRUE(SegmentsOf(child->pid()).empty())
          << "/dev/shm holds a segment of pid " << child->pid();
    }
  }

  TempDir dir_;
  FileKvStore store_{dir_.path()};
  std::vector<std::unique_ptr<Subprocess>> children_;
};

TEST_F(ShmProcessTest, CleanRunLeavesNothingInDevShm) {
  Start(10);
  for (int r = 0; r < kRanks; ++r) {
    std::optional<int> status = children_[r]->Wait(30000);
    ASSERT_TRUE(status.has_value()) << "rank " << r << " did not finish";
    EXPECT_EQ(*status, 0) << "rank " << r;
    ExpectResult(r, absl::StatusCode::kOk, 20000);
  }
  ExpectNoSegments();
}

TEST_F(ShmProcessTest, KilledRankFailsSurvivorsWithUnavailable) {
  Start(0);
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_TRUE(store_.Get(absl::StrCat("loop/", r), 20000).ok())
        << "rank " << r << " did not reach its loop";
  }
  children_[2]->Signal(SIGKILL);
  for (int r = 0; r < 2; ++r) {
    std::optional<int> status = children_[r]->Wait(10000);
    ASSERT_TRUE(status.has_value()) << "rank " << r << " still runs";
    EXPECT_EQ(*status, 0) << "rank " << r;
    ExpectResult(r, absl::StatusCode::kUnavailable, 2000);
  }
  children_[2]->Wait(10000);
  ExpectNoSegments();
}

TEST_F(ShmProcessTest, RankThatDiesInTheRendezvousLeavesNothingBehind) {
  // Rank 1 of 2 publishes its segment and is killed before rank 0 comes.
  Subprocess::Options o;
  o.argv = {PeerBinary(), dir_.path(), "1", "2", "1", "20000"};
  o.stderr_path = dir_.File("rank1.err");
  auto child = Subprocess::Start(o);
  ASSERT_TRUE(child.ok()) << child.status();
  children_.push_back(std::move(child).value());
  ASSERT_TRUE(store_.Get("shm/processes/peer/1", 20000).ok());
  children_[0]->Kill();
  ASSERT_FALSE(SegmentsOf(children_[0]->pid()).empty())
      << "the killed rank had no segment to leave behind";

  CommOptions options;
  options.rank = 0;
  options.size = 2;
  options.group = "processes";
  options.store = &store_;
  options.timeout_ms = 20000;
  options.host_transport = HostTransport::kShm;
  const absl::Time start = absl::Now();
  auto comm = CreateCommunicator(options);
  EXPECT_EQ(comm.status().code(), absl::StatusCode::kUnavailable)
      << comm.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  ExpectNoSegments();
}

}  // namespace
}  // namespace zshard::comm
