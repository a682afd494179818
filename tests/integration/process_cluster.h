// A control-plane cluster of real processes on 127.0.0.1 for integration
// tests: one zshard-coordinator (restartable on the same port and state
// dir), zshard-worker processes, and `zshardctl status --output json` to
// observe it. Logs go to files in a temp dir; every wait has a deadline.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "tests/testing/subprocess.h"
#include "tests/testing/temp_dir.h"

namespace zshard::testing {

// A job spec for tests: idle workload, short leases.
struct TestJob {
  int instances = 2;
  int min_world = 2;
  int max_world = 4;
  int64_t lease_timeout_ms = 1500;
  int64_t heartbeat_interval_ms = 200;
  int64_t steps = 0;
  int64_t step_delay_ms = 20;
  // When set, written as the job spec instead of the fields above.
  std::optional<nlohmann::json> spec;
  std::string ToJson() const;
};

// Where a process of the cluster runs: `prefix` is prepended to its
// command line (e.g. NetHosts::Command(i), which enters a network
// namespace) and `host` is the address it listens on or is reached at.
// The default is the test's own namespace on 127.0.0.1.
struct Placement {
  std::vector<std::string> prefix;
  std::string host = "127.0.0.1";
};

// Owns its processes (killed with SIGKILL on destruction). Not thread-safe.
class ProcessCluster {
 public:
  ProcessCluster();

  // Before StartCoordinator(): the coordinator runs under `placement` and
  // listens on placement.host at the cluster's port (address() follows).
  void PlaceCoordinator(Placement placement);
  // Workers started under `name` from now on run under `placement`, with
  // --comm-transport tcp --comm-host placement.host before their extra
  // flags: their peers reach their collectives at that host.
  void PlaceWorker(const std::string& name, Placement placement);
  // zshardctl (Status(), RunCtl()) runs under `placement`.
  void PlaceCtl(Placement placement);

  // Writes the job file and starts the coordinator on a fixed free port
  // with `extra_flags` (and --state-dir in the temp dir unless they hold
  // --store); waits until `status` answers (plaintext only; with
  // TLS pass wait = false and wait with the right flags).
  absl::Status StartCoordinator(
      const TestJob& job, const std::vector<std::string>& extra_flags = {},
      bool wait = true);
  // Restarts it with the same flags, port and state dir.
  absl::Status RestartCoordinator(bool wait = true);
  Subprocess* coordinator() { return coordinator_.get(); }

  // Starts `zshard-worker --name NAME` against the coordinator. Its log is
  // worker-NAME-N.log (N counts starts of that name).
  absl::StatusOr<Subprocess*> StartWorker(
      const std::string& name,
      const std::vector<std::string>& extra_flags = {});
  // The most recent process started under `name` (nullptr if none).
  Subprocess* worker(const std::string& name);
  // The log file of the most recent process of `name`.
  std::string WorkerLog(const std::string& name) const;

  // Runs zshardctl status --output json (plus `flags`); the parsed JSON, or
  // an error with zshardctl's exit status in the message.
  absl::StatusOr<nlohmann::json> Status(
      const std::vector<std::string>& flags = {});
  // Runs zshardctl with `args` after --coordinator; returns its exit status.
  int RunCtl(const std::vector<std::string>& args);

  // Polls Status() until `predicate` holds (returns that status) or the
  // deadline passes (DeadlineExceeded with the last status seen).
  absl::StatusOr<nlohmann::json> WaitForStatus(
      const std::function<bool(const nlohmann::json&)>& predicate,
      int64_t timeout_ms, const std::vector<std::string>& flags = {});

  // The coordinator's HOST:PORT (127.0.0.1 unless placed elsewhere).
  std::string address() const;
  const TempDir& dir() const { return dir_; }
  static std::string Bin(const std::string& name);

 private:
  TempDir dir_;
  int port_ = 0;
  Placement coordinator_placement_;
  Placement ctl_placement_;
  std::map<std::string, Placement> worker_placements_;
  std::vector<std::string> coordinator_flags_;
  int coordinator_starts_ = 0;
  std::unique_ptr<Subprocess> coordinator_;
  std::map<std::string, int> worker_starts_;
  std::map<std::string, std::unique_ptr<Subprocess>> workers_;
  // Older incarnations, kept so they are reaped.
  std::vector<std::unique_ptr<Subprocess>> retired_;
  int ctl_runs_ = 0;
};

// The model of the regression tests: a 16-64-4 bf16 MLP (biases without
// weight decay), as the "model" object of a job spec.
nlohmann::json RegressionMlpModel();

// Status helpers.
// The member named `name`, or null json.
nlohmann::json FindMember(const nlohmann::json& status,
                          const std::string& name);
// Members in `state` ("ACTIVE", "SPARE", ...).
int CountMembers(const nlohmann::json& status, const std::string& state);
// STABLE with world `world`, `world` ACTIVE members with distinct ranks
// 0..world-1, and `spares` SPARE members.
bool IsStableWorld(const nlohmann::json& status, int world, int spares);

}  // namespace zshard::testing
