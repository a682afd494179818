// ProcessCluster: process bookkeeping and status polling.

#include "tests/integration/process_cluster.h"

#include <algorithm>
#include <cstdlib>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tests/testing/free_port.h"
#include "tests/testing/log_scan.h"
#include "tests/testing/wait_for.h"

namespace zshard::testing {

namespace {

// The placement's prefix followed by `argv`.
std::vector<std::string> Prefixed(const Placement& placement,
                                  std::vector<std::string> argv) {
  std::vector<std::string> out = placement.prefix;
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

}  // namespace

std::string TestJob::ToJson() const {
  if (spec.has_value()) return spec->dump(2);
  nlohmann::json job = {
      {"name", "itest"},
      {"model", {{"preset", "gpt2-small"}}},
      {"world",
       {{"instances", instances}, {"min", min_world}, {"max", max_world}}},
      {"lease_timeout_ms", lease_timeout_ms},
      {"heartbeat_interval_ms", heartbeat_interval_ms},
      {"workload",
       {{"kind", "idle"}, {"steps", steps}, {"step_delay_ms", step_delay_ms}}}};
  return job.dump(2);
}

ProcessCluster::ProcessCluster() : port_(PickFreePort()) {}

void ProcessCluster::PlaceCoordinator(Placement placement) {
  coordinator_placement_ = std::move(placement);
}

void ProcessCluster::PlaceWorker(const std::string& name, Placement placement) {
  worker_placements_[name] = std::move(placement);
}

void ProcessCluster::PlaceCtl(Placement placement) {
  ctl_placement_ = std::move(placement);
}

std::string ProcessCluster::Bin(const std::string& name) {
  const char* dir = std::getenv("ZSHARD_BIN_DIR");
  return absl::StrCat(dir != nullptr ? dir : "build/bin", "/", name);
}

std::string ProcessCluster::address() const {
  return absl::StrCat(coordinator_placement_.host, ":", port_);
}

absl::Status ProcessCluster::StartCoordinator(
    const TestJob& job, const std::vector<std::string>& extra_flags,
    bool wait) {
  const std::string job_path = dir_.File("job.json");
  FILE* f = std::fopen(job_path.c_str(), "w");
  if (f == nullptr) return absl::InternalError("cannot write job.json");
  const std::string text = job.ToJson();
  std::fwrite(text.data(), 1, text.size(), f);
  std::fclose(f);
  coordinator_flags_ = {Bin("zshard-coordinator"), "--job", job_path,
                        "--listen", address()};
  // A --store among the extra flags replaces the state dir.
  if (std::find(extra_flags.begin(), extra_flags.end(), "--store") ==
      extra_flags.end()) {
    coordinator_flags_.push_back("--state-dir");
    coordinator_flags_.push_back(dir_.File("state"));
  }
  coordinator_flags_.insert(coordinator_flags_.end(), extra_flags.begin(),
                            extra_flags.end());
  return RestartCoordinator(wait);
}

absl::Status ProcessCluster::RestartCoordinator(bool wait) {
  if (coordinator_ != nullptr) coordinator_->Kill();
  Subprocess::Options options;
  options.argv = Prefixed(coordinator_placement_, coordinator_flags_);
  options.stdout_path =
      dir_.File(absl::StrCat("coordinator-", coordinator_starts_, ".out"));
  options.stderr_path =
      dir_.File(absl::StrCat("coordinator-", coordinator_starts_, ".log"));
  ++coordinator_starts_;
  auto child = Subprocess::Start(options);
  if (!child.ok()) return child.status();
  coordinator_ = *std::move(child);
  if (!wait) return absl::OkStatus();
  // On etcd a restart after kill -9 first waits out the killed one's
  // election lease (5 s by default), then loads the state.
  auto status =
      WaitForStatus([](const nlohmann::json&) { return true; }, 20000);
  if (!status.ok()) {
    return absl::UnavailableError(
        absl::StrCat("coordinator did not answer: ",
                     ReadLog(options.stderr_path).substr(0, 2000)));
  }
  return absl::OkStatus();
}

absl::StatusOr<Subprocess*> ProcessCluster::StartWorker(
    const std::string& name, const std::vector<std::string>& extra_flags) {
  Subprocess::Options options;
  options.argv = {Bin("zshard-worker"),
                  "--coordinator",
                  address(),
                  "--name",
                  name,
                  "--labels",
                  absl::StrCat("node=n-", name)};
  auto placed = worker_placements_.find(name);
  if (placed != worker_placements_.end()) {
    options.argv = Prefixed(placed->second, options.argv);
    for (const std::string& flag :
         {std::string("--comm-transport"), std::string("tcp"),
          std::string("--comm-host"), placed->second.host}) {
      options.argv.push_back(flag);
    }
  }
  options.argv.insert(options.argv.end(), extra_flags.begin(),
                      extra_flags.end());
  const int n = worker_starts_[name]++;
  options.stderr_path =
      dir_.File(absl::StrCat("worker-", name, "-", n, ".log"));
  options.stdout_path = options.stderr_path + ".out";
  auto child = Subprocess::Start(options);
  if (!child.ok()) return child.status();
  auto& slot = workers_[name];
  if (slot != nullptr) retired_.push_back(std::move(slot));
  slot = *std::move(child);
  return slot.get();
}

Subprocess* ProcessCluster::worker(const std::string& name) {
  auto it = workers_.find(name);
  return it == workers_.end() ? nullptr : it->second.get();
}

std::string ProcessCluster::WorkerLog(const std::string& name) const {
  auto it = worker_starts_.find(name);
  const int n = it == worker_starts_.end() ? 0 : it->second - 1;
  return dir_.File(absl::StrCat("worker-", name, "-", n, ".log"));
}

int ProcessCluster::RunCtl(const std::vector<std::string>& args) {
  Subprocess::Options options;
  options.argv =
      Prefixed(ctl_placement_, {Bin("zshardctl"), "--coordinator", address()});
  options.argv.insert(options.argv.end(), args.begin(), args.end());
  options.stdout_path = dir_.File("ctl.out");
  options.stderr_path = dir_.File("ctl.err");
  ++ctl_runs_;
  auto child = Subprocess::Start(options);
  if (!child.ok()) return -1;
  std::optional<int> rc = (*child)->Wait(15000);
  return rc.value_or(-1);
}

absl::StatusOr<nlohmann::json> ProcessCluster::Status(
    const std::vector<std::string>& flags) {
  std::vector<std::string> args = {"status", "--output", "json", "--timeout-ms",
                                   "2000"};
  args.insert(args.end(), flags.begin(), flags.end());
  const int rc = RunCtl(args);
  if (rc != 0) {
    return absl::UnavailableError(absl::StrCat(
        "zshardctl status exited ", rc, ": ", ReadLog(dir_.File("ctl.err"))));
  }
  nlohmann::json status =
      nlohmann::json::parse(ReadLog(dir_.File("ctl.out")), nullptr, false);
  if (status.is_discarded()) {
    return absl::InternalError("zshardctl status printed malformed json");
  }
  return status;
}

absl::StatusOr<nlohmann::json> ProcessCluster::WaitForStatus(
    const std::function<bool(const nlohmann::json&)>& predicate,
    int64_t timeout_ms, const std::vector<std::string>& flags) {
  absl::StatusOr<nlohmann::json> last =
      absl::DeadlineExceededError("no status yet");
  bool ok = WaitFor(
      [&] {
        last = Status(flags);
        return last.ok() && predicate(*last);
      },
      timeout_ms, 50);
  if (ok) return last;
  return absl::DeadlineExceededError(absl::StrCat(
      "status condition not met; last: ",
      last.ok() ? last->dump() : std::string(last.status().message())));
}

nlohmann::json RegressionMlpModel() {
  return {{"params",
           {{{"name", "fc1.weight"}, {"shape", {64, 16}}, {"dtype", "bf16"}},
            {{"name", "fc1.bias"},
             {"shape", {64}},
             {"dtype", "bf16"},
             {"no_weight_decay", true}},
            {{"name", "fc2.weight"}, {"shape", {4, 64}}, {"dtype", "bf16"}},
            {{"name", "fc2.bias"},
             {"shape", {4}},
             {"dtype", "bf16"},
             {"no_weight_decay", true}}}}};
}

nlohmann::json FindMember(const nlohmann::json& status,
                          const std::string& name) {
  if (!status.contains("members")) return nullptr;
  for (const nlohmann::json& m : status["members"]) {
    if (m.value("name", "") == name) return m;
  }
  return nullptr;
}

int CountMembers(const nlohmann::json& status, const std::string& state) {
  int n = 0;
  if (!status.contains("members")) return 0;
  for (const nlohmann::json& m : status["members"]) {
    if (m.value("state", "") == state) ++n;
  }
  return n;
}

bool IsStableWorld(const nlohmann::json& status, int world, int spares) {
  if (status.value("state", "") != "STABLE" ||
      status.value("world", 0) != world) {
    return false;
  }
  std::set<int> ranks;
  for (const nlohmann::json& m : status["members"]) {
    if (m.value("state", "") == "ACTIVE") ranks.insert(m.value("rank", -1));
  }
  return world > 0 && static_cast<int>(ranks.size()) == world &&
         *ranks.begin() == 0 && *ranks.rbegin() == world - 1 &&
         CountMembers(status, "ACTIVE") == world &&
         CountMembers(status, "SPARE") == spares;
}

}  // namespace zshard::testing
