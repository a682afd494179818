// Failures that used to end in silence, with real processes on 127.0.0.1:
// a rollback whose newest checkpoint is damaged (a flipped byte) or missing
// a rank file falls back to the previous one with an event and still ends
// with the reference masters of its own history; a preparation that fails
// for another reason gets a new proposal; checkpoint writes that fail while
// training goes on are events, a metric and incomplete attempts in the
// checkpoint list; a step that fails while every member lives gets a new
// epoch.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/integration/elastic_cluster.h"
#include "tests/integration/elastic_expect.h"
#include "tests/testing/free_port.h"
#include "tests/testing/wait_for.h"

namespace zshard::testing {
namespace {

namespace fs = std::filesystem;

// Damages rank-00001.zsc of every committed checkpoint under `root` newer
// than step 10 that is not in `done` yet: flips one byte, or removes the
// file.
void DamageNewerThanStep10(const std::string& root, bool remove,
                           std::set<std::string>* done) {
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(root, ec)) {
    const std::string name = e.path().filename().string();
    if (name <= "step-00000010" || done->count(name) ||
        !fs::exists(e.path() / "manifest.json")) {
      continue;
    }
    const fs::path file = e.path() / "rank-00001.zsc";
    if (remove) {
      fs::remove(file, ec);
    } else {
      std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
      f.seekg(100);
      const char c = static_cast<char>(f.get());
      f.seekp(100);
      f.put(static_cast<char>(c ^ 0x5a));
    }
    done->insert(name);
  }
}

// I = 1, checkpoints every 10 steps, world 3: a rank is killed with
// SIGKILL, so its ranges have no replica and the job rolls back. Every
// checkpoint newer than step 10 is damaged first; the workers find that out,
// the coordinator skips each with an event and restores step 10, and the
// job ends with the reference of that history.
void RollBackPastDamagedCheckpoints(bool remove) {
  ElasticRun run(RollbackJob(50));
  ASSERT_TRUE(run.Start().ok());
  const std::vector<std::string> names = WorkerNames(3);
  ASSERT_TRUE(run.StartWorkers(names).ok());
  const std::string root = run.job().checkpoint_dir;
  ASSERT_TRUE(
      WaitFor([&] { return fs::exists(root + "/step-00000020/manifest.json"); },
              kStartMs))
      << run.Diagnostics();
  auto before = run.WaitForRanksAtStep(3, 20, kStartMs);
  ASSERT_TRUE(before.ok()) << before.status() << "\n" << run.Diagnostics();
  const std::string victim = HolderOf(*before, 1);
  ASSERT_FALSE(victim.empty());
  const int64_t seq = LastSeq(run.Events());
  run.cluster().worker(victim)->Signal(SIGKILL);

  // Damage what the rollback would restore until the job is stable again
  // on an intact checkpoint (checkpoints that commit after the kill too).
  std::set<std::string> damaged;
  int64_t skipped_seq = 0;
  ASSERT_TRUE(WaitFor(
      [&] {
        DamageNewerThanStep10(root, remove, &damaged);
        const std::vector<v1::Event> events = run.Events();
        std::vector<v1::Event> skipped =
            EventsOfKind(events, "checkpoint_skipped", seq);
        if (skipped.empty()) return false;
        skipped_seq = skipped.back().seq();
        return !EventsOfKind(events, "stable", skipped_seq).empty() ||
               !EventsOfKind(events, "lost", seq).empty();
      },
      kStartMs))
      << run.Diagnostics();
  ASSERT_FALSE(damaged.empty());

  ExpectExitedZero(run, Without(names, victim));
  const std::vector<v1::Event> events = run.Events();
  EXPECT_TRUE(EventsOfKind(events, "lost", seq).empty())
      << DescribeEvents(events);
  std::vector<v1::Event> failed = EventsOfKind(events, "prepare_failed", seq);
  ASSERT_FALSE(failed.empty()) << DescribeEvents(events);
  EXPECT_NE(failed[0].reason().find("rank-00001.zsc"), std::string::npos)
      << failed[0].reason();
  std::vector<v1::Event> skipped =
      EventsOfKind(events, "checkpoint_skipped", seq);
  EXPECT_EQ(skipped.size(), damaged.size()) << DescribeEvents(events);
  auto history = run.probe().Reshards();
  ASSERT_TRUE(history.ok()) << history.status();
  int64_t restored = 0;
  for (const v1::Reshard& r : *history) {
    if (r.restored_step() > 0 && r.outcome() == "stable") {
      restored = r.restored_step();
    }
  }
  EXPECT_EQ(restored, 10) << DescribeEvents(events);
  ExpectReferenceMasters(run, 2);
}

TEST(FailurePathsTest, DamagedNewestCheckpointFallsBackToThePreviousOne) {
  RollBackPastDamagedCheckpoints(/*remove=*/false);
}

TEST(FailurePathsTest, MissingRankFileFallsBackToThePreviousCheckpoint) {
  RollBackPastDamagedCheckpoints(/*remove=*/true);
}

// A worker whose preparation of the first epoch fails for a reason of its
// own (an injected fault, --fault-prepare-failures 1): an event names the
// member and the reason, the coordinator proposes again at once (well
// within the transition timeout), and the job trains to the reference.
TEST(FailurePathsTest, FailedPreparationIsAnEventAndGetsANewProposal) {
  ElasticJob job;
  job.instances = 1;
  job.min_world = 2;
  job.max_world = 2;
  job.steps = 20;
  ElasticRun run(job);
  ASSERT_TRUE(run.Start().ok());
  ASSERT_TRUE(run.StartWorker("w0").ok());
  ASSERT_TRUE(run.StartWorker("w1", {"--fault-prepare-failures", "1"}).ok());
  auto failed = run.WaitForEvent("prepare_failed", 0, kStartMs);
  ASSERT_TRUE(failed.ok()) << failed.status() << "\n" << run.Diagnostics();
  EXPECT_NE(failed->reason().find("member w1 could not prepare"),
            std::string::npos)
      << failed->reason();
  EXPECT_NE(failed->reason().find("injected preparation fault"),
            std::string::npos)
      << failed->reason();
  ExpectExitedZero(run, {"w0", "w1"});
  const std::vector<v1::Event> events = run.Events();
  std::vector<v1::Event> stable = EventsOfKind(events, "stable", failed->seq());
  ASSERT_FALSE(stable.empty()) << DescribeEvents(events);
  EXPECT_GT(stable[0].epoch(), failed->epoch()) << DescribeEvents(events);
  EXPECT_TRUE(EventsOfKind(events, "timeout", 0).empty())
      << DescribeEvents(events);
  ExpectReferenceMasters(run, 2);
}

// A step that fails while every member lives: w1 is stopped (SIGSTOP) past
// the workers' collective timeout but well within its lease, so w0's step
// fails and no lease expires. w0 reports it (event step_failed); once w1 is
// continued and both have heartbeated since, the coordinator proposes the
// same world again (event replan) and the job trains to the reference.
TEST(FailurePathsTest, AStepFailedWithEveryMemberAliveGetsANewEpoch) {
  ElasticJob job;
  job.instances = 1;
  job.min_world = 2;
  job.max_world = 2;
  job.steps = 30;
  job.lease_timeout_ms = 20000;
  ElasticRun run(job);
  ASSERT_TRUE(run.Start().ok());
  const std::vector<std::string> fast = {"--collective-timeout-ms", "1000"};
  ASSERT_TRUE(run.StartWorker("w0", fast).ok());
  ASSERT_TRUE(run.StartWorker("w1", fast).ok());
  auto before = run.WaitForRanksAtStep(2, 5, kStartMs);
  ASSERT_TRUE(before.ok()) << before.status() << "\n" << run.Diagnostics();
  const int64_t seq = LastSeq(run.Events());
  run.cluster().worker("w1")->Signal(SIGSTOP);
  auto failed = run.WaitForEvent("step_failed", seq, kStartMs);
  run.cluster().worker("w1")->Signal(SIGCONT);
  ASSERT_TRUE(failed.ok()) << failed.status() << "\n" << run.Diagnostics();
  EXPECT_NE(failed->reason().find("failed on member w0"), std::string::npos)
      << failed->reason();
  auto replan = run.WaitForEvent("replan", failed->seq(), kStartMs);
  ASSERT_TRUE(replan.ok()) << replan.status() << "\n" << run.Diagnostics();
  EXPECT_NE(replan->reason().find("every member is alive"), std::string::npos)
      << replan->reason();
  ExpectExitedZero(run, {"w0", "w1"});
  const std::vector<v1::Event> events = run.Events();
  EXPECT_TRUE(EventsOfKind(events, "dead", seq).empty())
      << DescribeEvents(events);
  std::vector<v1::Event> stable = EventsOfKind(events, "stable", replan->seq());
  ASSERT_FALSE(stable.empty()) << DescribeEvents(events);
  EXPECT_GT(stable[0].epoch(), failed->epoch()) << DescribeEvents(events);
  ExpectReferenceMasters(run, 2);
}

// GET /metrics from 127.0.0.1:`port`: the body, or "" on any error.
std::string FetchMetrics(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string out;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string req =
        "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    if (write(fd, req.data(), req.size()) == static_cast<ssize_t>(req.size())) {
      char buf[4096];
      ssize_t n;
      while ((n = read(fd, buf, sizeof(buf))) > 0) out.append(buf, n);
    }
  }
  close(fd);
  return out;
}

// The checkpoint volume goes away mid-run (its directory becomes a file):
// every checkpoint write fails. Training goes on to the last step, and the
// operator sees events, the failure counter and incomplete attempts.
TEST(FailurePathsTest, FailedCheckpointWritesAreVisibleWhileTrainingGoesOn) {
  ElasticJob job;
  job.instances = 1;
  job.min_world = 2;
  job.max_world = 2;
  job.steps = 40;
  job.checkpoint_dir = "ckpt";
  job.checkpoint_every = 10;
  ElasticRun run(job);
  const int metrics_port = PickFreePort();
  ASSERT_TRUE(
      run.Start({"--metrics-listen", absl::StrCat("127.0.0.1:", metrics_port)})
          .ok());
  const std::vector<std::string> names = WorkerNames(2);
  ASSERT_TRUE(run.StartWorkers(names).ok());
  auto first = run.WaitForEvent("checkpoint", 0, kStartMs);
  ASSERT_TRUE(first.ok()) << first.status() << "\n" << run.Diagnostics();
  const std::string root = run.job().checkpoint_dir;
  fs::rename(root, root + ".gone");
  std::ofstream(root) << "not a directory\n";

  auto failed = run.WaitForEvent("checkpoint_failed", 0, kStartMs);
  ASSERT_TRUE(failed.ok()) << failed.status() << "\n" << run.Diagnostics();
  EXPECT_NE(failed->reason().find("cannot create directory"), std::string::npos)
      << failed->reason();
  ExpectExitedZero(run, names);

  const std::string metrics = FetchMetrics(metrics_port);
  std::smatch m;
  static const std::regex kFailures(
      "\nzshard_checkpoint_failures_total ([0-9]+)\n");
  ASSERT_TRUE(std::regex_search(metrics, m, kFailures)) << metrics;
  EXPECT_GE(std::stoi(m[1].str()), 2);  // both ranks, at least once

  auto list = run.probe().CheckpointList();
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->checkpoints_size(), 1);  // step 10, before the volume went
  EXPECT_EQ(list->checkpoints(0).step(), 10);
  ASSERT_GE(list->incomplete_size(), 1);
  EXPECT_EQ(list->incomplete(0).step(), 20);
  ASSERT_GE(list->incomplete(0).failures_size(), 1);
  EXPECT_NE(list->incomplete(0).failures(0).find("cannot create directory"),
            std::string::npos);
}

}  // namespace
}  // namespace zshard::testing
