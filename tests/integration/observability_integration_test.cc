// Observability end to end with real processes on 127.0.0.1: a coordinator
// and five workers (I = 2, world 4 and one spare) run the regression
// workload. The dashboard's measured ledger equals the predicted one for
// every rank, `zshardctl top` renders every rank under a pseudo-terminal,
// /metrics parses as Prometheus text, logs are JSON lines with their
// context, and `zshardctl events --follow` started before a kill -9 shows
// the dead member and the re-shard that follows with its reason.
#include <signal.h>

#include <cstdio>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/integration/process_cluster.h"
#include "tests/testing/free_port.h"
#include "tests/testing/log_scan.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/wait_for.h"

namespace zshard::testing {
namespace {

using nlohmann::json;

constexpr int kWorkers = 5;
constexpr int kWorld = 4;

// A regression MLP (as in the demo), running far longer than the test.
json JobSpec() {
  const json model = RegressionMlpModel();
  return {{"name", "obs"},
          {"model", model},
          {"layout", {{"bucket_size", 512}}},
          {"optimizer", {{"lr", 1e-2}}},
          {"world", {{"instances", 2}, {"min", 2}, {"max", kWorld}}},
          {"lease_timeout_ms", 2500},
          {"heartbeat_interval_ms", 100},
          {"workload",
           {{"kind", "regression"},
            {"steps", 1000000},
            {"global_batch", 32},
            {"step_delay_ms", 20}}}};
}

// Drops ANSI escape sequences.
std::string StripAnsi(const std::string& s) {
  static const std::regex kEscape("\033\\[[0-9;]*[A-Za-z]");
  return std::regex_replace(s, kEscape, "");
}

// One JSON value per non-empty line of `text` (discarded when not JSON).
std::vector<json> JsonLines(const std::string& text) {
  std::vector<json> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) out.push_back(json::parse(line, nullptr, false));
  }
  return out;
}

class ObservabilityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    metrics_port_ = PickFreePort();
    TestJob job;
    job.spec = JobSpec();
    ASSERT_TRUE(
        cluster_
            .StartCoordinator(job, {"--http-listen",
                                    absl::StrCat("127.0.0.1:", metrics_port_),
                                    "--log-format", "json"})
            .ok());
    for (int i = 0; i < kWorkers; ++i) {
      ASSERT_TRUE(cluster_.StartWorker(Name(i), {"--log-format=json"}).ok());
      // Join in order, so that the last one is the spare.
      ASSERT_TRUE(cluster_
                      .WaitForStatus(
                          [&](const json& s) {
                            return !FindMember(s, Name(i)).is_null();
                          },
                          20000)
                      .ok());
    }
    auto stable = cluster_.WaitForStatus(
        [](const json& s) { return IsStableWorld(s, kWorld, 1); }, 60000);
    ASSERT_TRUE(stable.ok()) << stable.status();
  }

  static std::string Name(int i) { return absl::StrCat("w", i); }

  // zshardctl ARGS... against the cluster: exit status and stdout.
  std::pair<int, std::string> Ctl(const std::vector<std::string>& args) {
    const int rc = cluster_.RunCtl(args);
    return {rc, ReadLog(cluster_.dir().File("ctl.out")) +
                    ReadLog(cluster_.dir().File("ctl.err"))};
  }

  absl::StatusOr<json> CtlJson(const std::vector<std::string>& args) {
    std::vector<std::string> full = args;
    full.insert(full.end(), {"--output", "json", "--timeout-ms", "3000"});
    auto [rc, out] = Ctl(full);
    if (rc != 0) {
      return absl::UnavailableError(absl::StrCat("exit ", rc, ": ", out));
    }
    json j = json::parse(out, nullptr, false);
    if (j.is_discarded()) return absl::InternalError("not json: " + out);
    return j;
  }

  // True when every rank of the ledger has telemetry from a step after
  // `after_step` of epoch >= `epoch` and its measured bytes equal the
  // predicted ones in every category. `last` keeps the ledger seen.
  bool LedgerMatches(int64_t epoch, json* last) {
    auto ledger = CtlJson({"ledger"});
    if (!ledger.ok()) return false;
    *last = *ledger;
    if ((*ledger)["epoch"].get<int64_t>() < epoch) return false;
    if ((*ledger)["ranks"].size() != static_cast<size_t>(kWorld)) return false;
    for (const json& r : (*ledger)["ranks"]) {
      if (r["measured_bytes"].is_null()) return false;
      if (r["measured_bytes"] != r["predicted_bytes"]) return false;
      for (const char* c :
           {"param", "grad", "master", "exp_avg", "exp_avg_sq"}) {
        if (r["categories"][c]["measured"] != r["categories"][c]["predicted"])
          return false;
      }
    }
    return true;
  }

  // `python3` parses /metrics with prometheus_client and prints one line
  // per sample: NAME LABEL=VALUE... VALUE. Empty on failure (in `error`).
  std::string ParsedMetrics(std::string* error) {
    const std::string script =
        "import sys, urllib.request\n"
        "from prometheus_client.parser import text_string_to_metric_families\n"
        "text = urllib.request.urlopen(sys.argv[1], timeout=5).read()"
        ".decode()\n"
        "for f in text_string_to_metric_families(text):\n"
        "  for s in f.samples:\n"
        "    labels = ' '.join(k + '=' + v for k, v in "
        "sorted(s.labels.items()))\n"
        "    print(s.name, labels, s.value)\n";
    const std::string path = cluster_.dir().File("parse_metrics.py");
    FILE* f = std::fopen(path.c_str(), "w");
    if (f == nullptr) return "";
    std::fputs(script.c_str(), f);
    std::fclose(f);
    const std::string cmd =
        absl::StrCat("/usr/bin/python3 ", path,
                     " http://127.0.0.1:", metrics_port_, "/metrics 2>&1");
    FILE* pipe = popen(cmd.c_str(), "r");
    if (pipe == nullptr) return "";
    std::string out;
    char buf[4096];
    while (size_t n = fread(buf, 1, sizeof(buf), pipe)) out.append(buf, n);
    if (pclose(pipe) != 0) {
      *error = out;
      return "";
    }
    return out;
  }

  // zshard_reshards_total from /metrics, or -1.
  double ReshardsTotal() {
    std::string error;
    const std::string metrics = ParsedMetrics(&error);
    std::smatch m;
    static const std::regex kTotal("(^|\n)zshard_reshards_total  ([0-9.]+)\n");
    if (!std::regex_search(metrics, m, kTotal)) return -1;
    return std::stod(m[2].str());
  }

  ProcessCluster cluster_;
  int metrics_port_ = 0;
};

TEST_F(ObservabilityTest, LedgerTopMetricsAndLogs) {
  // Measured equals predicted for every rank (every allocation counted).
  json ledger;
  EXPECT_TRUE(WaitFor([&] { return LedgerMatches(1, &ledger); }, 30000, 200))
      << ledger.dump(1);
  EXPECT_EQ(ledger["stage"], "zero1");
  EXPECT_EQ(ledger["world"], kWorld);
  EXPECT_EQ(ledger["instances"], 2);

  // top under a pseudo-terminal: every member, coloured, ranks 0..3.
  auto status = cluster_.Status();
  ASSERT_TRUE(status.ok()) << status.status();
  const std::string cmd = absl::StrCat(
      "script -qec '", ProcessCluster::Bin("zshardctl"), " --coordinator ",
      cluster_.address(), " top --once' /dev/null");
  FILE* pipe = popen(cmd.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string top;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), pipe)) top.append(buf, n);
  ASSERT_EQ(pclose(pipe), 0) << top;
  EXPECT_NE(top.find("\033[32m"), std::string::npos) << top;  // ACTIVE
  const std::string plain = StripAnsi(top);
  std::set<int> ranks;
  for (const json& m : (*status)["members"]) {
    const std::string name = m["name"];
    const int rank = m["rank"];
    const std::regex row(absl::StrCat(
        "(^|\n)", name, " +", rank < 0 ? std::string("-") : absl::StrCat(rank),
        " +", rank < 0 ? "SPARE" : "ACTIVE", " +[0-9]+ "));
    EXPECT_TRUE(std::regex_search(plain, row)) << name << " in\n" << plain;
    if (rank >= 0) ranks.insert(rank);
  }
  EXPECT_EQ(ranks, (std::set<int>{0, 1, 2, 3}));

  // /metrics is Prometheus text: per-rank samples for every rank, the
  // cluster's members and re-shard counters.
  std::string error;
  const std::string metrics = ParsedMetrics(&error);
  ASSERT_FALSE(metrics.empty()) << error;
  for (int r = 0; r < kWorld; ++r) {
    const std::regex step(absl::StrCat("(^|\n)zshard_rank_step instance=[01] ",
                                       "rank=", r, " worker=w[0-9] [0-9.]+\n"));
    EXPECT_TRUE(std::regex_search(metrics, step)) << r << "\n" << metrics;
  }
  EXPECT_NE(metrics.find("zshard_members state=ACTIVE 4.0\n"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("zshard_members state=SPARE 1.0\n"),
            std::string::npos);
  EXPECT_TRUE(std::regex_search(
      metrics, std::regex("(^|\n)zshard_reshards_total  [0-9.]+\n")))
      << metrics;

  // --log-format=json: every line of every log is a JSON object with
  // time, level, msg and the context (job; worker and rank for workers).
  auto check_log = [](const std::string& path, bool worker) {
    std::vector<json> lines = JsonLines(ReadLog(path));
    EXPECT_FALSE(lines.empty()) << path;
    bool ranked = false;
    for (const json& j : lines) {
      ASSERT_TRUE(j.is_object()) << path << "\n" << ReadLog(path);
      EXPECT_TRUE(j.contains("time") && j.contains("level") &&
                  j.contains("msg"))
          << j.dump();
      EXPECT_EQ(j.value("job", ""), "obs") << j.dump();
      if (worker && j.contains("rank") && j.contains("epoch")) ranked = true;
    }
    if (worker) {
      EXPECT_TRUE(ranked) << "no line with rank and epoch: " << path;
    }
  };
  check_log(cluster_.dir().File("coordinator-0.log"), false);
  for (int i = 0; i < kWorld; ++i) check_log(cluster_.WorkerLog(Name(i)), true);
}

TEST_F(ObservabilityTest, EventsFollowShowsAKillAndTheReshard) {
  // Training runs on every rank before the kill.
  ASSERT_TRUE(WaitFor(
      [&] {
        auto s = cluster_.Status();
        if (!s.ok()) return false;
        for (const json& m : (*s)["members"]) {
          if (m["rank"].get<int>() >= 0 && m["step"].get<int64_t>() < 5) {
            return false;
          }
        }
        return true;
      },
      30000, 200));
  Subprocess::Options options;
  options.argv = {ProcessCluster::Bin("zshardctl"),
                  "--coordinator",
                  cluster_.address(),
                  "events",
                  "--follow",
                  "--output",
                  "json"};
  options.stdout_path = cluster_.dir().File("follow.out");
  options.stderr_path = cluster_.dir().File("follow.err");
  auto follow = Subprocess::Start(options);
  ASSERT_TRUE(follow.ok()) << follow.status();
  // The past events are printed first.
  ASSERT_TRUE(WaitFor(
      [&] { return LogContains(options.stdout_path, "\"kind\":\"stable\""); },
      10000));

  auto before = cluster_.Status();
  ASSERT_TRUE(before.ok());
  const double reshards_before = ReshardsTotal();
  ASSERT_GE(reshards_before, 0);
  std::string victim;
  for (const json& m : (*before)["members"]) {
    if (m["rank"] == 1) victim = m["name"];
  }
  ASSERT_FALSE(victim.empty());
  cluster_.worker(victim)->Signal(SIGKILL);

  // dead -> ... -> moves -> ... -> stable, all after the kill.
  std::vector<json> events;
  auto seen = [&] {
    events = JsonLines(ReadLog(options.stdout_path));
    size_t dead = events.size();
    for (size_t i = 0; i < events.size(); ++i) {
      if (events[i].is_object() && events[i]["kind"] == "dead" &&
          events[i]["reason"].get<std::string>().find(victim) !=
              std::string::npos) {
        dead = i;
        break;
      }
    }
    bool moves = false;
    for (size_t i = dead; i < events.size(); ++i) {
      if (events[i]["kind"] == "moves") moves = true;
      if (moves && events[i]["kind"] == "stable") return true;
    }
    return false;
  };
  const bool reshard_seen = WaitFor(seen, 45000, 200);
  std::string shown;
  for (const json& e : events) shown += e.dump() + "\n";
  ASSERT_TRUE(reshard_seen) << "victim " << victim << "\n" << shown;
  for (const json& e : events) {
    EXPECT_TRUE(e.is_object());
    if (e["kind"] == "propose" || e["kind"] == "moves" ||
        e["kind"] == "stable") {
      EXPECT_FALSE(e["reason"].get<std::string>().empty()) << e.dump();
    }
  }
  follow.value()->Signal(SIGTERM);
  follow.value()->Wait(5000);

  // The spare took the rank; the history shows one stable re-shard that
  // moved exactly the lower bound; the ledger matches again for the new
  // rank holder; the metrics count it.
  auto after = cluster_.WaitForStatus(
      [](const json& s) { return IsStableWorld(s, kWorld, 0); }, 30000);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(FindMember(*after, victim)["state"], "DEAD");
  auto reshards = CtlJson({"reshards"});
  ASSERT_TRUE(reshards.ok()) << reshards.status();
  ASSERT_FALSE(reshards->empty());
  const json& last = reshards->back();
  EXPECT_EQ(last["epoch"], (*after)["epoch"]) << last.dump();
  EXPECT_EQ(last["outcome"], "stable") << last.dump();
  EXPECT_GT(last["bytes_moved"].get<int64_t>(), 0) << last.dump();
  EXPECT_EQ(last["bytes_moved"], last["lower_bound_bytes"]) << last.dump();
  json ledger;
  EXPECT_TRUE(WaitFor(
      [&] { return LedgerMatches((*after)["epoch"].get<int64_t>(), &ledger); },
      30000, 200))
      << ledger.dump(1);
  EXPECT_GT(ReshardsTotal(), reshards_before);
}

}  // namespace
}  // namespace zshard::testing
