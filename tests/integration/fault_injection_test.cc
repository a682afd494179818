// Fault injection over seeded trials (issue 6): each trial runs a small
// synthetic job on real processes and kills a random worker at a random
// point (inside a step: reduce-scatter, commit, Adam or all-gather, aimed
// by the ranks' step and a random offset; during a state move; during a
// checkpoint write), in some trials also kill -9s the coordinator during
// the transition that follows and restarts it on its state dir, or drops
// the world below its minimum. Every trial must either finish with the
// reference masters or stop with a clear error ("lost": no replica and no
// checkpoint); nothing is silently lost. The seed is in the test's name
// (FaultInjectionTest.Trial/Seed7) and in every failure message.

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "tests/integration/elastic_cluster.h"
#include "tests/testing/log_scan.h"
#include "tests/testing/wait_for.h"

namespace zshard::testing {
namespace {

constexpr int kTrials = 24;
constexpr int64_t kStartMs = 60000;
constexpr int64_t kEndMs = 120000;

enum class Scenario {
  kSpareTakeover,     // I = 2 with a spare: kill a rank inside a step
  kRollback,          // I = 1, checkpoints: kill a rank inside a step
  kDuringMove,        // I = 2 growing 2 -> 4: kill during the moves
  kDuringCheckpoint,  // I = 1: kill as a checkpoint step is written
  kCoordinatorCrash,  // spare takeover, then kill -9 the coordinator
  kBelowMinWorld,     // min = max = 3: kill one, then a replacement joins
};
constexpr int kScenarios = 6;

const char* ScenarioName(Scenario s) {
  switch (s) {
    case Scenario::kSpareTakeover:
      return "spare takeover";
    case Scenario::kRollback:
      return "rollback";
    case Scenario::kDuringMove:
      return "kill during a move";
    case Scenario::kDuringCheckpoint:
      return "kill during a checkpoint write";
    case Scenario::kCoordinatorCrash:
      return "coordinator crash during a transition";
    case Scenario::kBelowMinWorld:
      return "below min world";
  }
  return "?";
}

// What the fault left running and what the trial may end with.
struct Injected {
  std::vector<std::string> alive;  // workers expected to exit by themselves
  bool must_finish = true;         // a replica or a committed checkpoint exists
  std::string what;                // the faults, for messages
};

class FaultInjectionTest : public ::testing::TestWithParam<int> {
 protected:
  FaultInjectionTest()
      : seed_(GetParam()),
        scenario_(static_cast<Scenario>(seed_ % kScenarios)),
        rng_(static_cast<uint32_t>(seed_) * 2654435761u) {}

  int Uniform(int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng_);
  }

  // A random offset that places the next kill at a random point of a step
  // (or of a transition); it synchronizes nothing.
  void Jitter(int max_ms) {
    std::this_thread::sleep_for(std::chrono::milliseconds(Uniform(0, max_ms)));
  }

  ElasticJob BaseJob() {
    ElasticJob job;
    job.name = absl::StrCat("fault-", seed_);
    job.param_sizes = {900, 300, 2000, 7, 130, 600};
    job.bucket_size = 512;
    job.lease_timeout_ms = 1500;
    job.heartbeat_interval_ms = 100;
    // Some trials step flat out (kills land inside collectives), others
    // slowly (kills land between steps and in transitions).
    const int64_t delays[] = {0, 5, 20};
    const int64_t steps[] = {300, 150, 60};
    const int pick = Uniform(0, 2);
    job.step_delay_ms = delays[pick];
    job.steps = steps[pick];
    return job;
  }

  // Kills a random ranked member once every rank is past `step`; returns
  // its name ("" and a failure when it cannot).
  std::string KillRandomRank(ElasticRun& run, int world, int64_t step) {
    auto status = run.WaitForRanksAtStep(world, step, kStartMs);
    EXPECT_TRUE(status.ok()) << status.status() << "\n" << run.Diagnostics();
    if (!status.ok()) return "";
    Jitter(static_cast<int>(run.job().step_delay_ms) + 10);
    std::vector<v1::MemberStatus> ranked = RankedMembers(*status);
    const std::string victim =
        ranked[Uniform(0, static_cast<int>(ranked.size()) - 1)].name();
    run.cluster().worker(victim)->Signal(SIGKILL);
    return victim;
  }

  bool HasCheckpoint(ElasticRun& run) {
    return !EventsOfKind(run.Events(), "checkpoint").empty();
  }

  Injected SpareTakeover(ElasticRun& run, bool crash_coordinator);
  Injected Rollback(ElasticRun& run);
  Injected DuringMove(ElasticRun& run);
  Injected DuringCheckpoint(ElasticRun& run);
  Injected BelowMinWorld(ElasticRun& run);
  // Waits for the survivors and checks the outcome.
  void Conclude(ElasticRun& run, const Injected& injected);

  const int seed_;
  const Scenario scenario_;
  std::mt19937 rng_;
};

std::vector<std::string> Survivors(const std::vector<std::string>& names,
                                   const std::string& victim) {
  std::vector<std::string> out;
  for (const std::string& n : names) {
    if (n != victim) out.push_back(n);
  }
  return out;
}

Injected FaultInjectionTest::SpareTakeover(ElasticRun& run,
                                           bool crash_coordinator) {
  Injected injected;
  const std::vector<std::string> names = WorkerNames(5);
  EXPECT_TRUE(run.Start().ok());
  EXPECT_TRUE(run.StartWorkers(names).ok());
  const int64_t seq = LastSeq(run.Events());
  const std::string victim = KillRandomRank(run, 4, Uniform(2, 12));
  injected.alive = Survivors(names, victim);
  injected.what = absl::StrCat("killed ", victim);
  if (!crash_coordinator) return injected;
  const char* kinds[] = {"dead", "propose", "commit"};
  const char* at = kinds[Uniform(0, 2)];
  auto event = run.WaitForEvent(at, seq, 30000);
  EXPECT_TRUE(event.ok()) << event.status();
  Jitter(200);
  run.cluster().coordinator()->Signal(SIGKILL);
  EXPECT_TRUE(run.cluster().coordinator()->Wait(10000).has_value());
  const absl::Status restarted = run.cluster().RestartCoordinator();
  EXPECT_TRUE(restarted.ok()) << restarted;
  absl::StrAppend(&injected.what, ", coordinator killed after '", at, "'");
  return injected;
}

Injected FaultInjectionTest::Rollback(ElasticRun& run) {
  Injected injected;
  const std::vector<std::string> names = WorkerNames(3);
  EXPECT_TRUE(run.Start().ok());
  EXPECT_TRUE(run.StartWorkers(names).ok());
  const int every = static_cast<int>(run.job().checkpoint_every);
  const std::string victim = KillRandomRank(run, 3, Uniform(2, 3 * every));
  injected.must_finish = HasCheckpoint(run);
  injected.alive = Survivors(names, victim);
  injected.what = absl::StrCat(
      "killed ", victim,
      injected.must_finish ? " after a checkpoint" : " before a checkpoint");
  return injected;
}

Injected FaultInjectionTest::DuringMove(ElasticRun& run) {
  Injected injected;
  std::vector<std::string> names = WorkerNames(2);
  EXPECT_TRUE(run.Start().ok());
  EXPECT_TRUE(run.StartWorkers(names).ok());
  EXPECT_TRUE(run.WaitForRanksAtStep(2, Uniform(2, 8), kStartMs).ok())
      << run.Diagnostics();
  const int64_t seq = LastSeq(run.Events());
  EXPECT_TRUE(run.StartWorkers({"w2", "w3"}).ok());
  names = WorkerNames(4);
  auto commit = run.WaitForEvent("commit", seq, 30000);
  EXPECT_TRUE(commit.ok()) << commit.status() << "\n" << run.Diagnostics();
  Jitter(50);
  const std::string victim = names[Uniform(0, 3)];
  run.cluster().worker(victim)->Signal(SIGKILL);
  injected.alive = Survivors(names, victim);
  injected.what =
      absl::StrCat("killed ", victim, " after '", commit->reason(), "'");
  return injected;
}

Injected FaultInjectionTest::DuringCheckpoint(ElasticRun& run) {
  Injected injected;
  const std::vector<std::string> names = WorkerNames(3);
  EXPECT_TRUE(run.Start().ok());
  EXPECT_TRUE(run.StartWorkers(names).ok());
  auto first = run.WaitForEvent("checkpoint", 0, kStartMs);
  EXPECT_TRUE(first.ok()) << first.status() << "\n" << run.Diagnostics();
  // The next checkpoint step after the ranks' current one: kill as soon as
  // a rank reaches it (its file is being written).
  auto status = run.probe().Status();
  const int64_t every = run.job().checkpoint_every;
  const int64_t now = status.ok() ? MinRankedStep(*status) : 0;
  const int64_t target = (now / every + 1) * every;
  std::string victim;
  WaitFor(
      [&] {
        auto s = run.probe().Status();
        if (!s.ok()) return false;
        for (const v1::MemberStatus& m : RankedMembers(*s)) {
          if (m.step() >= target) victim = m.name();
        }
        return !victim.empty();
      },
      kStartMs, 5);
  EXPECT_FALSE(victim.empty()) << run.Diagnostics();
  if (victim.empty()) return injected;
  Jitter(5);
  run.cluster().worker(victim)->Signal(SIGKILL);
  injected.alive = Survivors(names, victim);
  injected.what =
      absl::StrCat("killed ", victim, " at checkpoint step ", target);
  return injected;
}

Injected FaultInjectionTest::BelowMinWorld(ElasticRun& run) {
  Injected injected;
  std::vector<std::string> names = WorkerNames(3);
  EXPECT_TRUE(run.Start().ok());
  EXPECT_TRUE(run.StartWorkers(names).ok());
  const int64_t seq = LastSeq(run.Events());
  const int every = static_cast<int>(run.job().checkpoint_every);
  const std::string victim = KillRandomRank(run, 3, Uniform(2, 3 * every));
  injected.must_finish = HasCheckpoint(run);
  // The coordinator says why the job cannot go on: the world is below its
  // minimum ("waiting"), or the state is lost.
  std::vector<v1::Event> said;
  WaitFor(
      [&] {
        auto events = run.probe().Events();
        if (!events.ok()) return false;
        said = EventsOfKind(*events, "waiting", seq);
        for (const v1::Event& e : EventsOfKind(*events, "lost", seq)) {
          said.push_back(e);
        }
        return !said.empty();
      },
      30000, 50);
  EXPECT_FALSE(said.empty()) << run.Diagnostics();
  if (!said.empty() && said[0].kind() == "waiting") {
    EXPECT_NE(said[0].reason().find("world needs 3"), std::string::npos)
        << said[0].reason();
  }
  // No survivor ends the job as if it were finished.
  for (const std::string& name : Survivors(names, victim)) {
    std::optional<int> code = run.cluster().worker(name)->Wait(0);
    EXPECT_NE(code, 0) << name << " exited 0 below the min world";
  }
  EXPECT_TRUE(run.StartWorker("w3").ok());
  names.push_back("w3");
  injected.alive = Survivors(names, victim);
  injected.what = absl::StrCat("killed ", victim, ", w3 replaced it after '",
                               said.empty() ? "" : said[0].reason(), "'");
  return injected;
}

// True when a "dead" event names member `name` (the coordinator fenced it).
bool DeclaredDead(const std::vector<v1::Event>& events,
                  const std::string& name) {
  for (const v1::Event& e : EventsOfKind(events, "dead")) {
    if (e.reason().find("member " + name + ":") != std::string::npos) {
      return true;
    }
  }
  return false;
}

void FaultInjectionTest::Conclude(ElasticRun& run, const Injected& injected) {
  std::map<std::string, int> codes = run.WaitForExits(injected.alive, kEndMs);
  const std::vector<v1::Event> events = run.Events();
  const bool lost = !EventsOfKind(events, "lost").empty();
  // A worker the coordinator declared dead (a lease missed under load) is
  // fenced: it must exit non-zero saying so, and is no survivor.
  int survivors = 0, zero = 0;
  std::vector<std::string> summary;
  for (const auto& [name, code] : codes) {
    summary.push_back(absl::StrCat(name, "=", code));
    EXPECT_NE(code, -1) << name << " hangs\n" << run.Diagnostics();
    if (DeclaredDead(events, name)) {
      summary.back() += " (declared dead)";
      EXPECT_NE(code, 0) << name << " was declared dead yet exited 0";
      EXPECT_TRUE(LogContains(run.cluster().WorkerLog(name), "is DEAD"))
          << run.WorkerLog(name);
      continue;
    }
    ++survivors;
    if (code == 0) ++zero;
  }
  SCOPED_TRACE(
      absl::StrCat(injected.what, "; exits ", absl::StrJoin(summary, " ")));
  if (survivors > 0 && zero == survivors) {
    EXPECT_FALSE(lost) << DescribeEvents(events);
    auto status = run.probe().Status();
    ASSERT_TRUE(status.ok()) << status.status();
    auto check = run.CheckMasters();
    ASSERT_TRUE(check.ok()) << check.status() << "\n" << run.Diagnostics();
    EXPECT_TRUE(check->ok()) << check->ToString() << "\n" << run.Diagnostics();
    std::vector<int> ranks;
    for (int r = 0; r < status->world(); ++r) ranks.push_back(r);
    EXPECT_EQ(check->dumped_ranks, ranks) << check->ToString();
    return;
  }
  // Not finished: it must be the clear failure of a lost range, never a
  // hang, a mix of finished and failed workers, or a silent end. Each
  // survivor names the coordinator's reason (the "lost" event's text).
  EXPECT_FALSE(injected.must_finish)
      << "a trial with a replica or a checkpoint did not finish\n"
      << run.Diagnostics();
  EXPECT_TRUE(lost) << run.Diagnostics();
  const std::vector<v1::Event> lost_events = EventsOfKind(events, "lost");
  const std::string reason =
      lost_events.empty() ? "(no lost event)" : lost_events[0].reason();
  for (const auto& [name, code] : codes) {
    if (DeclaredDead(events, name)) continue;
    EXPECT_NE(code, 0) << name << " finished a failed job";
    const std::string log = run.cluster().WorkerLog(name);
    EXPECT_TRUE(LogContains(log, reason))
        << name << " exited without naming why: " << reason << "\n"
        << ReadLog(log);
  }
  std::error_code ec;
  for (const auto& entry :
       std::filesystem::directory_iterator(run.dump_dir(), ec)) {
    ADD_FAILURE() << "a failed job dumped " << entry.path();
  }
}

TEST_P(FaultInjectionTest, Trial) {
  SCOPED_TRACE(absl::StrCat("seed ", seed_, " (", ScenarioName(scenario_),
                            "); rerun with --gtest_filter=*Trial/Seed", seed_));
  ElasticJob job = BaseJob();
  Injected injected;
  switch (scenario_) {
    case Scenario::kSpareTakeover:
    case Scenario::kCoordinatorCrash: {
      job.instances = 2;
      job.min_world = 2;
      job.max_world = 4;
      ElasticRun run(job);
      injected = SpareTakeover(run, scenario_ == Scenario::kCoordinatorCrash);
      Conclude(run, injected);
      return;
    }
    case Scenario::kDuringMove: {
      // keep_i: world 2 is two replicas (D = 1), so a kill during the
      // move to world 4 always leaves a holder.
      job.instances = 2;
      job.min_world = 2;
      job.max_world = 4;
      job.resize = "keep_i";
      ElasticRun run(job);
      injected = DuringMove(run);
      Conclude(run, injected);
      return;
    }
    case Scenario::kRollback:
    case Scenario::kDuringCheckpoint:
    case Scenario::kBelowMinWorld: {
      job.instances = 1;
      job.min_world = scenario_ == Scenario::kBelowMinWorld ? 3 : 2;
      job.max_world = 3;
      job.checkpoint_dir = "ckpt";
      job.checkpoint_every = job.steps / 12;
      if (scenario_ == Scenario::kDuringCheckpoint) {
        // Bigger state so that the write takes a while; fewer steps so
        // that the trial stays short.
        job.param_sizes = {60000, 300, 40000, 7, 1300, 20000};
        job.bucket_size = 40000;
        job.steps = 40;
        job.step_delay_ms = 10;
        job.checkpoint_every = 5;
      }
      ElasticRun run(job);
      injected = scenario_ == Scenario::kRollback ? Rollback(run)
                 : scenario_ == Scenario::kBelowMinWorld
                     ? BelowMinWorld(run)
                     : DuringCheckpoint(run);
      Conclude(run, injected);
      return;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Seeds, FaultInjectionTest,
                         ::testing::Range(1, kTrials + 1),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return absl::StrCat("Seed", info.param);
                         });

}  // namespace
}  // namespace zshard::testing
