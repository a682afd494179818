// Shared assertions of the elastic integration tests.
#include "tests/integration/elastic_expect.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/testing/log_scan.h"
#include "tests/testing/wait_for.h"

namespace zshard::testing {

std::string FinishedCheckpoint(ElasticRun& run, int64_t step) {
  char name[32];
  std::snprintf(name, sizeof(name), "/step-%08lld",
                static_cast<long long>(step));
  const std::string dir = run.job().checkpoint_dir + name;
  EXPECT_TRUE(WaitFor(
      [&] { return std::filesystem::exists(dir + "/manifest.json"); }, 10000))
      << run.Diagnostics();
  return dir;
}

ElasticJob RestoredJob(ElasticJob job, int world, int64_t steps) {
  job.min_world = world;
  job.max_world = world;
  job.steps = steps;
  job.checkpoint_dir.clear();
  job.checkpoint_every = 0;
  return job;
}

void ExpectRestoredRun(ElasticRun& run, const std::string& dir, int world) {
  ASSERT_TRUE(run.Start({"--restore", dir}).ok()) << run.CoordinatorLog();
  const std::vector<std::string> names = WorkerNames(world);
  ASSERT_TRUE(run.StartWorkers(names).ok());
  ExpectExitedZero(run, names);
  const std::vector<v1::Event> events = run.Events();
  EXPECT_FALSE(EventsOfKind(events, "restore").empty())
      << DescribeEvents(events);
  const std::string last = absl::StrCat(" step=", run.job().steps, " ");
  for (const std::string& name : names) {
    const std::string log = run.cluster().WorkerLog(name);
    EXPECT_FALSE(LogContains(log, " step=1 ")) << "restarted from scratch";
    EXPECT_TRUE(LogContains(log, last)) << ReadLog(log);
  }
}

ElasticJob RollbackJob(int64_t steps) {
  ElasticJob job;
  job.instances = 1;
  job.min_world = 2;
  job.max_world = 3;
  job.steps = steps;
  job.checkpoint_dir = "ckpt";
  job.checkpoint_every = 10;
  return job;
}

std::string HolderOf(const v1::GetClusterStatusResponse& status, int rank) {
  for (const v1::MemberStatus& m : RankedMembers(status)) {
    if (m.rank() == rank) return m.name();
  }
  return "";
}

int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string SpareOf(const v1::GetClusterStatusResponse& status) {
  std::string spare;
  for (const v1::MemberStatus& m : status.members()) {
    if (m.state() == v1::MEMBER_STATE_SPARE) spare = m.name();
  }
  return spare;
}

std::vector<std::string> Without(std::vector<std::string> names,
                                 const std::string& name) {
  names.erase(std::remove(names.begin(), names.end(), name), names.end());
  return names;
}

void ExpectExitedZero(ElasticRun& run, const std::vector<std::string>& names) {
  std::map<std::string, int> codes = run.WaitForExits(names, kExitMs);
  for (const std::string& name : names) {
    EXPECT_EQ(codes[name], 0) << "worker " << name << "\n" << run.Diagnostics();
  }
}

void ExpectReferenceMasters(ElasticRun& run, int world,
                            const std::vector<Topology>& before) {
  absl::StatusOr<DumpCheck> check = run.CheckMasters(before);
  ASSERT_TRUE(check.ok()) << check.status() << "\n" << run.Diagnostics();
  EXPECT_TRUE(check->ok()) << check->ToString();
  std::vector<int> ranks;
  for (int r = 0; r < world; ++r) ranks.push_back(r);
  EXPECT_EQ(check->dumped_ranks, ranks) << check->ToString();
}

}  // namespace zshard::testing
