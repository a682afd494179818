// The pod life cycle of deploy/k8s played locally with real processes
// (issue 8): worker pods started exactly as the StatefulSet starts them
// (the worker container's args and env read from the manifest, the
// downward API and $(VAR) expansion emulated), then a rolling restart, a
// scale-down, a scale-up and a drain. The job keeps training through every
// change, each change is a live re-shard moving exactly the lower bound, and
// the final members' masters equal the undisturbed reference. Collectives
// and state moves run over tcp, as between pods.

#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "tests/integration/elastic_cluster.h"
#include "tests/integration/pod_template.h"
#include "tests/testing/log_scan.h"
#include "tests/testing/subprocess.h"

namespace zshard::testing {
namespace {

constexpr char kManifest[] = "deploy/k8s/base/worker-statefulset.yaml";
constexpr char kNamespace[] = "zshard";
constexpr char kZoneLabel[] = "topology.kubernetes.io/zone";
constexpr int64_t kStartMs = 30000;
constexpr int64_t kChangeMs = 30000;
constexpr int64_t kExitMs = 60000;
// Steps each new world must run before the next change: the job trains
// between changes, not only across them.
constexpr int64_t kStepsBetweenChanges = 5;

std::string PodName(int ordinal) {
  return absl::StrCat("zshard-worker-", ordinal);
}
// Two nodes in two zones, pods spread over them by ordinal.
std::string NodeOf(int ordinal) {
  return ordinal % 2 == 0 ? "node-a" : "node-b";
}
std::string ZoneOf(int ordinal) {
  return ordinal % 2 == 0 ? "zone-1" : "zone-2";
}

std::string Tail(const std::string& text, size_t n = 3000) {
  return text.size() <= n ? text : "..." + text.substr(text.size() - n);
}

// The worker container of the StatefulSet in the source tree.
absl::StatusOr<ContainerTemplate> WorkerContainer() {
  const char* source = std::getenv("ZSHARD_SOURCE_DIR");
  const std::string path =
      absl::StrCat(source != nullptr ? source : ".", "/", kManifest);
  const std::string yaml = ReadLog(path);
  if (yaml.empty()) {
    return absl::NotFoundError(absl::StrCat("cannot read ", path));
  }
  return ReadContainerTemplate(yaml, "worker");
}

// The StatefulSet's pods as local processes against `run`'s coordinator.
// Pod zshard-worker-N gets the container's env resolved for it, with two
// differences a single host needs: the Service name zshard-coordinator
// resolves to the test's coordinator, and the metrics port is picked by
// the kernel (pods have a network namespace each; these processes share
// one). Each pod also dumps its masters for the reference check. Not
// thread-safe; owns its processes (killed on destruction).
class PodSet {
 public:
  PodSet(ElasticRun& run, ContainerTemplate container)
      : run_(run), container_(std::move(container)) {}

  // Creates pod `ordinal`; a name that ran before starts a new
  // incarnation (the old process must have exited, as the StatefulSet
  // controller waits for that).
  absl::Status Start(int ordinal) {
    const std::string name = PodName(ordinal);
    // Pods have an address each; these processes share the loopback.
    PodFacts facts{name,
                   kNamespace,
                   NodeOf(ordinal),
                   "127.0.0.1",
                   {{kZoneLabel, ZoneOf(ordinal)}}};
    auto env = ResolveEnv(container_, facts);
    if (!env.ok()) return env.status();
    if (env->count("ZSHARD_COORDINATOR") == 0) {
      return absl::FailedPreconditionError(
          "the worker container does not pass ZSHARD_COORDINATOR");
    }
    (*env)["ZSHARD_COORDINATOR"] = run_.cluster().address();
    Subprocess::Options options;
    options.argv = {ProcessCluster::Bin("zshard-worker")};
    for (const std::string& arg : container_.args) {
      options.argv.push_back(ExpandReferences(arg, *env));
    }
    for (size_t i = 1; i + 1 < options.argv.size(); ++i) {
      if (options.argv[i] == "--metrics-listen") {
        options.argv[i + 1] = "127.0.0.1:0";
      }
    }
    options.argv.push_back("--dump-master");
    options.argv.push_back(run_.dump_dir());
    // Pods have their own pid and ipc namespaces, so their collectives and
    // state moves go over tcp; these processes share one, so say it.
    options.argv.push_back("--comm-transport");
    options.argv.push_back("tcp");
    for (const auto& [key, value] : *env) {
      options.env.push_back(absl::StrCat(key, "=", value));
    }
    const int n = starts_[ordinal]++;
    options.stderr_path = run_.File(absl::StrCat("pod-", name, "-", n, ".log"));
    options.stdout_path = options.stderr_path + ".out";
    auto child = Subprocess::Start(options);
    if (!child.ok()) return child.status();
    auto& slot = pods_[ordinal];
    if (slot != nullptr) retired_.push_back(std::move(slot));
    slot = *std::move(child);
    logs_[ordinal] = options.stderr_path;
    return absl::OkStatus();
  }

  // SIGTERM, as the kubelet sends it after the preStop hook.
  void Terminate(int ordinal) { pods_.at(ordinal)->Signal(SIGTERM); }

  // The exit status of pod `ordinal`'s current process (-1 when it is still
  // running at the deadline; it is then killed).
  int WaitExit(int ordinal, int64_t timeout_ms) {
    Subprocess* pod = pods_.at(ordinal).get();
    std::optional<int> code = pod->Wait(timeout_ms);
    if (!code.has_value()) pod->Kill();
    return code.value_or(-1);
  }

  // The events, the tail of every pod's current log and the coordinator's.
  std::string Diagnostics() {
    std::string out = "== events\n" + DescribeEvents(run_.Events());
    for (const auto& [ordinal, log] : logs_) {
      absl::StrAppend(&out, "== ", log, "\n", Tail(ReadLog(log)), "\n");
    }
    return out + run_.CoordinatorLog();
  }

 private:
  ElasticRun& run_;
  const ContainerTemplate container_;
  std::map<int, int> starts_;
  std::map<int, std::unique_ptr<Subprocess>> pods_;
  std::map<int, std::string> logs_;
  // Earlier incarnations, kept so they are reaped.
  std::vector<std::unique_ptr<Subprocess>> retired_;
};

// True when some event of `kind` after `seq` mentions `text`.
bool HasEvent(const std::vector<v1::Event>& events, const std::string& kind,
              int64_t seq, const std::string& text) {
  for (const v1::Event& e : EventsOfKind(events, kind, seq)) {
    if (absl::StrContains(e.reason(), text)) return true;
  }
  return false;
}

std::string LabelOf(const v1::MemberStatus& m, const std::string& key) {
  auto it = m.labels().find(key);
  return it == m.labels().end() ? "" : it->second;
}

std::string WorkerIdOf(const v1::GetClusterStatusResponse& status,
                       const std::string& name) {
  const v1::MemberStatus* m = FindMemberStatus(status, name);
  return m == nullptr ? "" : m->worker_id();
}

TEST(PodTemplateTest, ResolvesTheWorkerContainerOfTheStatefulSet) {
  auto container = WorkerContainer();
  ASSERT_TRUE(container.ok()) << container.status();
  EXPECT_TRUE(container->command.empty()) << "the image's ENTRYPOINT runs";
  PodFacts facts{
      "zshard-worker-7", "ns", "node-x", "10.0.0.7", {{kZoneLabel, "zone-q"}}};
  auto env = ResolveEnv(*container, facts);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ((*env)["POD_NAME"], "zshard-worker-7");
  std::vector<std::string> args;
  for (const std::string& arg : container->args) {
    args.push_back(ExpandReferences(arg, *env));
  }
  const std::string joined = absl::StrJoin(args, " ");
  EXPECT_TRUE(absl::StrContains(joined, "--labels node=node-x,zone=zone-q"))
      << joined;
  EXPECT_TRUE(absl::StrContains(
      joined, "--address zshard-worker-7.zshard-workers.ns.svc:7701"))
      << joined;
  EXPECT_FALSE(absl::StrContains(joined, "$(")) << joined;
  EXPECT_EQ(ExpandReferences("$$(POD_NAME) $(NOPE)", *env),
            "$(POD_NAME) $(NOPE)");
}

// Three pods (world 3, I = 1, min 2, max 4), then: a rolling restart of
// zshard-worker-1 (SIGTERM: hand-over and exit 0, world 2; the pod again
// under its name: a new incarnation, world 3), a scale-down to 2 replicas
// (SIGTERM zshard-worker-2: hand-over, world 2), a scale-up to 4
// (zshard-worker-2 and -3 at once: world 4), and `zshardctl drain` of
// zshard-worker-0 (hand-over, world 3; restarted by the kubelet, world 4).
TEST(PodLifecycleTest, RollingRestartScaleDownAndScaleUpKeepTheJobTraining) {
  const auto started = std::chrono::steady_clock::now();
  auto container = WorkerContainer();
  ASSERT_TRUE(container.ok()) << container.status();
  ElasticJob job;
  job.name = "pod-lifecycle";
  job.instances = 1;
  job.min_world = 2;
  job.max_world = 4;
  job.steps = 300;
  job.step_delay_ms = 50;
  // A graceful hand-over needs no lease; a long one keeps a loaded machine
  // from declaring a busy worker dead.
  job.lease_timeout_ms = 5000;
  ElasticRun run(job);
  // The admin token, as the Deployment mounts it, for zshardctl drain.
  const std::string token = run.File("admin-token");
  {
    FILE* f = std::fopen(token.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("pod-lifecycle-token\n", f);
    std::fclose(f);
  }
  ASSERT_TRUE(run.Start({"--admin-token-file", token}).ok())
      << run.CoordinatorLog();
  PodSet pods(run, *std::move(container));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(pods.Start(i).ok());

  auto initial = run.WaitForRanksAtStep(3, kStepsBetweenChanges, kStartMs);
  ASSERT_TRUE(initial.ok()) << initial.status() << "\n" << pods.Diagnostics();
  for (int i = 0; i < 3; ++i) {
    const v1::MemberStatus* m = FindMemberStatus(*initial, PodName(i));
    ASSERT_NE(m, nullptr) << initial->ShortDebugString();
    EXPECT_EQ(LabelOf(*m, "node"), NodeOf(i));
    EXPECT_EQ(LabelOf(*m, "zone"), ZoneOf(i));
    EXPECT_EQ(m->address(), absl::StrCat(PodName(i), ".zshard-workers.",
                                         kNamespace, ".svc:7701"));
  }
  const int64_t seq = LastSeq(run.Events());
  std::vector<int64_t> steps = {MinRankedStep(*initial)};
  // Waits for a stable `world` that trained past the last change.
  auto next_world = [&](int world) {
    auto status = run.WaitForRanksAtStep(
        world, steps.back() + kStepsBetweenChanges, kChangeMs);
    if (status.ok()) steps.push_back(MinRankedStep(*status));
    return status;
  };

  // 1. Rolling restart of zshard-worker-1.
  pods.Terminate(1);
  EXPECT_EQ(pods.WaitExit(1, kChangeMs), 0) << pods.Diagnostics();
  auto without_1 = next_world(2);
  ASSERT_TRUE(without_1.ok()) << without_1.status() << "\n"
                              << pods.Diagnostics();
  ASSERT_TRUE(pods.Start(1).ok());
  auto restarted = next_world(3);
  ASSERT_TRUE(restarted.ok()) << restarted.status() << "\n"
                              << pods.Diagnostics();
  EXPECT_NE(WorkerIdOf(*restarted, PodName(1)),
            WorkerIdOf(*initial, PodName(1)))
      << "the restarted pod must be a new incarnation";

  // 2. Scale down to 2 replicas: the highest ordinal goes.
  pods.Terminate(2);
  EXPECT_EQ(pods.WaitExit(2, kChangeMs), 0) << pods.Diagnostics();
  auto shrunk = next_world(2);
  ASSERT_TRUE(shrunk.ok()) << shrunk.status() << "\n" << pods.Diagnostics();
  const v1::MemberStatus* gone = FindMemberStatus(*shrunk, PodName(2));
  EXPECT_TRUE(gone == nullptr || gone->rank() < 0)
      << shrunk->ShortDebugString();

  // 3. Scale up to 4 replicas (parallel pod management: both at once).
  ASSERT_TRUE(pods.Start(2).ok());
  ASSERT_TRUE(pods.Start(3).ok());
  auto grown = next_world(4);
  ASSERT_TRUE(grown.ok()) << grown.status() << "\n" << pods.Diagnostics();

  // 4. `zshardctl drain zshard-worker-0 --wait` (e.g. before cordoning its
  // node): the same hand-over; the process exits 0 and the kubelet
  // restarts the container, a new incarnation that grows the world back.
  EXPECT_EQ(run.cluster().RunCtl(
                {"--token-file", token, "drain", PodName(0), "--wait"}),
            0)
      << ReadLog(run.File("ctl.err")) << pods.Diagnostics();
  EXPECT_EQ(pods.WaitExit(0, kChangeMs), 0) << pods.Diagnostics();
  auto drained = next_world(3);
  ASSERT_TRUE(drained.ok()) << drained.status() << "\n" << pods.Diagnostics();
  ASSERT_TRUE(pods.Start(0).ok());
  auto back = next_world(4);
  ASSERT_TRUE(back.ok()) << back.status() << "\n" << pods.Diagnostics();

  // The job runs to its end on the final four.
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(pods.WaitExit(i, kExitMs), 0) << PodName(i) << "\n"
                                            << pods.Diagnostics();
  }
  for (size_t i = 1; i < steps.size(); ++i) {
    EXPECT_GT(steps[i], steps[i - 1]) << "training did not advance";
  }

  // Every change is in the event log with its reason, as a live re-shard.
  const std::vector<v1::Event> events = run.Events();
  const std::string described = DescribeEvents(events);
  for (const char* kind : {"rollback", "restore", "lost", "dead", "failed"}) {
    EXPECT_TRUE(EventsOfKind(events, kind).empty()) << kind << "\n"
                                                    << described;
  }
  for (int i : {1, 2}) {
    const std::string name = PodName(i);
    EXPECT_TRUE(HasEvent(events, "drain", seq,
                         absl::StrCat("member ", name, " is leaving")))
        << name << "\n"
        << described;
    EXPECT_TRUE(HasEvent(events, "propose", seq,
                         absl::StrCat("member ", name, " is leaving")))
        << name << "\n"
        << described;
    EXPECT_TRUE(HasEvent(events, "leave", seq, absl::StrCat("member ", name)))
        << name << "\n"
        << described;
  }
  for (int i : {1, 2, 3}) {
    EXPECT_TRUE(HasEvent(events, "join", seq,
                         absl::StrCat("member ", PodName(i), " joined")))
        << PodName(i) << "\n"
        << described;
  }
  EXPECT_TRUE(HasEvent(events, "propose", seq, "member zshard-worker-1 joined"))
      << described;
  EXPECT_TRUE(
      HasEvent(events, "propose", seq, "member zshard-worker-2 joined") ||
      HasEvent(events, "propose", seq, "member zshard-worker-3 joined"))
      << described;
  EXPECT_TRUE(HasEvent(events, "drain", seq, "member zshard-worker-0 drained"))
      << described;
  EXPECT_TRUE(HasEvent(events, "propose", seq, "member zshard-worker-0 joined"))
      << described;
  EXPECT_GE(EventsOfKind(events, "stable", seq).size(), 6u) << described;
  // No step was redone: each commit resumes at or after the previous one.
  int64_t resumed = 0;
  for (const v1::Event& e : EventsOfKind(events, "commit", seq)) {
    const size_t at = e.reason().find("resume step ");
    ASSERT_NE(at, std::string::npos) << e.reason();
    const int64_t step = std::atoll(e.reason().c_str() + at + 12);
    EXPECT_GE(step, resumed) << described;
    resumed = step;
  }
  EXPECT_GT(resumed, 0) << described;

  // Each re-shard moved exactly the lower bound, none of it from a
  // checkpoint.
  const std::vector<v1::Event> moves = EventsOfKind(events, "moves", seq);
  EXPECT_GE(moves.size(), 6u) << described;
  for (const v1::Event& e : moves) {
    const std::optional<int64_t> bytes = BytesInReason(e.reason());
    ASSERT_TRUE(bytes.has_value()) << e.reason();
    EXPECT_GT(*bytes, 0) << e.reason();
    EXPECT_EQ(LowerBoundInReason(e.reason()), bytes) << e.reason();
    EXPECT_TRUE(absl::StrContains(e.reason(), " 0 from checkpoint"))
        << e.reason();
  }
  auto history = run.probe().Reshards();
  ASSERT_TRUE(history.ok()) << history.status();
  std::vector<std::string> changes;
  for (const v1::Reshard& r : *history) {
    if (r.outcome() != "stable" || r.epoch() <= initial->epoch()) continue;
    changes.push_back(absl::StrCat(r.world_before(), "->", r.world_after()));
    EXPECT_EQ(r.summary().bytes_moved(), r.summary().lower_bound_bytes())
        << r.ShortDebugString();
    EXPECT_EQ(r.summary().bytes_from_checkpoint(), 0) << r.ShortDebugString();
    EXPECT_EQ(r.restored_step(), 0) << r.ShortDebugString();
  }
  const std::string joined = absl::StrJoin(changes, " ");
  EXPECT_TRUE(joined == "3->2 2->3 3->2 2->4 4->3 3->4" ||
              joined == "3->2 2->3 3->2 2->3 3->4 4->3 3->4")
      << joined;

  // The final members' masters equal the reference of the worlds the run
  // went through (from its commits) and the undisturbed run's at world 4:
  // with gradients reduced in fp32 the two differ by summation order only.
  absl::StatusOr<DumpCheck> check = run.CheckMasters();
  ASSERT_TRUE(check.ok()) << check.status() << "\n" << pods.Diagnostics();
  EXPECT_TRUE(check->ok()) << check->ToString();
  EXPECT_EQ(check->dumped_ranks, std::vector<int>({0, 1, 2, 3}))
      << check->ToString();
  auto spec = job.Spec();
  ASSERT_TRUE(spec.ok()) << spec.status();
  absl::StatusOr<DumpCheck> undisturbed = CheckDump(
      run.dump_dir(), *spec,
      std::vector<Topology>(static_cast<size_t>(job.steps), Topology{4, 1}));
  ASSERT_TRUE(undisturbed.ok()) << undisturbed.status();
  EXPECT_TRUE(undisturbed->ok()) << undisturbed->ToString();
  const auto wall = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - started);
  std::printf(
      "pod life cycle: %lld ms; worlds %s; steps at the changes: %s\n"
      "schedule reference: %s\nundisturbed reference: %s\n",
      static_cast<long long>(wall.count()), joined.c_str(),
      absl::StrJoin(steps, ", ").c_str(), check->ToString().c_str(),
      undisturbed->ToString().c_str());
}

}  // namespace
}  // namespace zshard::testing
