// Shared assertions of the elastic integration tests.
#include "tests/integration/elastic_expect.h"

#include <algorithm>
#include <chrono>
#include <map>

#include "gtest/gtest.h"

namespace zshard::testing {

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
