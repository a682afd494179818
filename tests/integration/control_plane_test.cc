// Integration tests of the control plane with real processes on
// 127.0.0.1: world and spares, a killed worker replaced by the spare, a
// coordinator killed and restarted on its state dir, fencing of an older
// incarnation, the end of a job, and a graceful leave on SIGTERM.

#include <signal.h>

#include <chrono>

#include "gtest/gtest.h"
#include "tests/integration/process_cluster.h"
#include "tests/testing/log_scan.h"
#include "tests/testing/wait_for.h"

namespace zshard::testing {
namespace {

using nlohmann::json;

class ControlPlaneTest : public ::testing::Test {
 protected:
  void StartWorkers(int n) {
    for (int i = 0; i < n; ++i) {
      auto worker = cluster_.StartWorker("w" + std::to_string(i));
      ASSERT_TRUE(worker.ok()) << worker.status();
    }
  }

  ProcessCluster cluster_;
  TestJob job_;
};

TEST_F(ControlPlaneTest, SpareTakesTheRankOfAKilledWorker) {
  ASSERT_TRUE(cluster_.StartCoordinator(job_).ok());
  StartWorkers(5);
  auto stable = cluster_.WaitForStatus(
      [](const json& s) { return IsStableWorld(s, 4, 1); }, 20000);
  ASSERT_TRUE(stable.ok()) << stable.status();
  EXPECT_EQ((*stable)["instances"], 2);
  std::string spare;
  std::string victim;
  int victim_rank = -1;
  for (const json& m : (*stable)["members"]) {
    if (m["state"] == "SPARE") {
      spare = m["name"].get<std::string>();
      EXPECT_EQ(m["rank"], -1);
      EXPECT_EQ(m["instance"], -1);
    }
    if (m["state"] == "ACTIVE" && m["rank"] == 1) {
      victim = m["name"].get<std::string>();
      victim_rank = 1;
      EXPECT_EQ(m["instance"], 0);
      EXPECT_EQ(m["shard_rank"], 1);
      EXPECT_EQ(m["labels"]["node"], "n-" + victim);
    }
  }
  ASSERT_FALSE(spare.empty());
  ASSERT_FALSE(victim.empty());
  const int64_t epoch = (*stable)["epoch"];

  const auto killed_at = std::chrono::steady_clock::now();
  cluster_.worker(victim)->Signal(SIGKILL);
  auto recovered = cluster_.WaitForStatus(
      [&](const json& s) {
        return s["epoch"] > epoch && IsStableWorld(s, 4, 0) &&
               FindMember(s, spare)["rank"] == victim_rank;
      },
      job_.lease_timeout_ms + 3000);
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now() - killed_at)
                        .count();
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  EXPECT_LE(took, job_.lease_timeout_ms + 3000);
  // Survivors keep their ranks.
  for (const json& m : (*stable)["members"]) {
    if (m["state"] == "ACTIVE" && m["name"] != victim) {
      EXPECT_EQ(FindMember(*recovered, m["name"].get<std::string>())["rank"],
                m["rank"])
          << m["name"];
    }
  }
  EXPECT_NE(FindMember(*recovered, victim).value("state", "DEAD"), "ACTIVE");
  // The spare steps from the resume step on.
  auto stepping = cluster_.WaitForStatus(
      [&](const json& s) { return FindMember(s, spare)["step"] > 0; }, 5000);
  EXPECT_TRUE(stepping.ok()) << stepping.status();
}

TEST_F(ControlPlaneTest, CoordinatorRestartKeepsEpochMembersAndSteps) {
  ASSERT_TRUE(cluster_.StartCoordinator(job_).ok());
  StartWorkers(4);
  auto before = cluster_.WaitForStatus(
      [](const json& s) {
        return IsStableWorld(s, 4, 0) && FindMember(s, "w0")["step"] > 5;
      },
      20000);
  ASSERT_TRUE(before.ok()) << before.status();

  cluster_.coordinator()->Signal(SIGKILL);
  ASSERT_TRUE(cluster_.coordinator()->Wait(5000).has_value());
  // Every worker notices the outage and steps on.
  ASSERT_TRUE(WaitFor(
      [&] {
        for (int i = 0; i < 4; ++i) {
          if (!LogContains(cluster_.WorkerLog("w" + std::to_string(i)),
                           "heartbeat failed")) {
            return false;
          }
        }
        return true;
      },
      5000));
  for (int i = 0; i < 4; ++i) {
    EXPECT_TRUE(cluster_.worker("w" + std::to_string(i))->Running());
  }
  absl::Status restarted = cluster_.RestartCoordinator();
  ASSERT_TRUE(restarted.ok()) << restarted;

  auto after = cluster_.WaitForStatus(
      [&](const json& s) {
        return IsStableWorld(s, 4, 0) &&
               FindMember(s, "w0")["last_heartbeat_ms"] < 1000;
      },
      10000);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ((*after)["epoch"], (*before)["epoch"]);
  EXPECT_EQ((*after)["plan_hash"], (*before)["plan_hash"]);
  for (const json& m : (*before)["members"]) {
    json now = FindMember(*after, m["name"].get<std::string>());
    ASSERT_FALSE(now.is_null()) << m["name"];
    EXPECT_EQ(now["worker_id"], m["worker_id"]);
    EXPECT_EQ(now["rank"], m["rank"]);
  }
  // Steps advanced while the coordinator was down (and are reported).
  auto advanced = cluster_.WaitForStatus(
      [&](const json& s) {
        for (const json& m : (*before)["members"]) {
          if (FindMember(s, m["name"].get<std::string>())["step"] <=
              m["step"].get<int64_t>() + 10)
            return false;
        }
        return true;
      },
      5000);
  ASSERT_TRUE(advanced.ok()) << advanced.status();
  EXPECT_EQ((*advanced)["epoch"], (*before)["epoch"]);
}

TEST_F(ControlPlaneTest, RestartedNameFencesTheOlderIncarnation) {
  job_.max_world = 2;
  ASSERT_TRUE(cluster_.StartCoordinator(job_).ok());
  StartWorkers(2);
  auto stable = cluster_.WaitForStatus(
      [](const json& s) { return IsStableWorld(s, 2, 0); }, 20000);
  ASSERT_TRUE(stable.ok()) << stable.status();
  const std::string old_id =
      FindMember(*stable, "w1")["worker_id"].get<std::string>();
  Subprocess* old_process = cluster_.worker("w1");

  ASSERT_TRUE(cluster_.StartWorker("w1").ok());
  std::optional<int> old_exit = old_process->Wait(10000);
  ASSERT_TRUE(old_exit.has_value()) << "the fenced incarnation kept running";
  EXPECT_EQ(*old_exit, 1);
  auto replaced = cluster_.WaitForStatus(
      [&](const json& s) {
        json m = FindMember(s, "w1");
        return IsStableWorld(s, 2, 0) && m["worker_id"] != old_id &&
               m["state"] == "ACTIVE";
      },
      10000);
  EXPECT_TRUE(replaced.ok()) << replaced.status();
  EXPECT_TRUE(cluster_.worker("w1")->Running());
}

TEST_F(ControlPlaneTest, WorkersExitZeroWhenTheStepsAreDone) {
  job_.max_world = 2;
  job_.steps = 30;
  job_.step_delay_ms = 10;
  ASSERT_TRUE(cluster_.StartCoordinator(job_).ok());
  StartWorkers(2);
  for (const char* name : {"w0", "w1"}) {
    std::optional<int> rc = cluster_.worker(name)->Wait(15000);
    ASSERT_TRUE(rc.has_value()) << name << " did not finish";
    EXPECT_EQ(*rc, 0) << name;
  }
}

TEST_F(ControlPlaneTest, SigtermLeavesGracefully) {
  job_.max_world = 2;
  ASSERT_TRUE(cluster_.StartCoordinator(job_).ok());
  StartWorkers(3);
  auto stable = cluster_.WaitForStatus(
      [](const json& s) { return IsStableWorld(s, 2, 1); }, 20000);
  ASSERT_TRUE(stable.ok()) << stable.status();
  cluster_.worker("w2")->Signal(SIGTERM);
  EXPECT_EQ(cluster_.worker("w2")->Wait(5000), 0);
  EXPECT_TRUE(LogContains(cluster_.WorkerLog("w2"), "left the job"));
  // A left member is no longer a spare.
  auto left = cluster_.WaitForStatus(
      [](const json& s) {
        json m = FindMember(s, "w2");
        return m.is_null() || (m["state"] != "SPARE" && m["state"] != "ACTIVE");
      },
      5000);
  EXPECT_TRUE(left.ok()) << left.status();
}

// Starts zshard-worker with `--device device` and expects exit status 2
// with one line on stderr that contains `want`.
void ExpectDeviceRefused(const std::string& device, const std::string& want) {
  TempDir dir;
  Subprocess::Options options;
  options.argv = {ProcessCluster::Bin("zshard-worker"),
                  "--name",
                  "w",
                  "--coordinator",
                  "127.0.0.1:1",
                  "--device",
                  device};
  options.stderr_path = dir.File("err");
  auto child = Subprocess::Start(options);
  ASSERT_TRUE(child.ok());
  EXPECT_EQ((*child)->Wait(5000), 2);
  std::string err = ReadLog(dir.File("err"));
  EXPECT_NE(err.find(want), std::string::npos) << err;
  EXPECT_EQ(err.find('\n'), err.size() - 1) << err;
}

TEST(WorkerBinaryTest, BadFlagsExitTwoWithOneLine) {
  ExpectDeviceRefused("tpu", "--device");
}

// A worker asked for a GPU it cannot use exits at start: never a silent CPU
// run. cuda:1023 exists on no machine this runs on.
TEST(WorkerBinaryTest, MissingCudaDeviceExitsTwoWithOneLine) {
  ExpectDeviceRefused("cuda:1023", "--device cuda:1023");
}

TEST(CtlBinaryTest, UnreachableCoordinatorExitsThree) {
  TempDir dir;
  Subprocess::Options options;
  options.argv = {ProcessCluster::Bin("zshardctl"),
                  "--coordinator",
                  "127.0.0.1:1",
                  "status",
                  "--timeout-ms",
                  "500"};
  options.stderr_path = dir.File("err");
  auto child = Subprocess::Start(options);
  ASSERT_TRUE(child.ok());
  EXPECT_EQ((*child)->Wait(5000), 3);
  EXPECT_NE(ReadLog(dir.File("err")).find("unreachable"), std::string::npos);
}

}  // namespace
}  // namespace zshard::testing
