// zshard-loadgen: simulates many worker sessions against a coordinator and
// prints heartbeat latency percentiles, failures, fenced workers, the
// proposals made and the coordinator's CPU use. Given several coordinators
// (--coordinator a:1,b:2,c:3), its simulated workers follow the leader.
//
//   zshard-loadgen (--coordinator ADDR[,ADDR...] [--coordinator-pid PID] |
//                   --job FILE|PRESET [--coordinator-bin F] [--store SPEC])
//       [--workers 1000] [--duration-s 30] [--warmup-s 0]
//       [--heartbeat-ms 2000] [--lease-ms 20000] [--instances 8] [--kill 0]
//       [--connections 8] [--no-watch] [--output json|text]
//       [--tls-ca F] [--tls-cert F --tls-key F]
//
// Exit status: 0 done, 1 the run failed, 2 bad flags.

#include <cstdio>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/flags.h"
#include "common/mutex_mode.h"
#include "common/net/coordinator_list.h"
#include "common/net/leader_follower.h"
#include "common/status.h"
#include "nlohmann/json.hpp"
#include "tools/loadgen/load_generator.h"
#include "tools/loadgen/local_coordinator.h"

ABSL_FLAG(std::string, coordinator, "",
          "HOST:PORT of the coordinator, or a comma-separated list of them "
          "(several coordinators: the simulated workers follow the leader)");
ABSL_FLAG(int64_t, workers, 1000, "simulated worker sessions");
ABSL_FLAG(int64_t, duration_s, 30, "measured seconds");
ABSL_FLAG(int64_t, warmup_s, 0, "seconds of load before measuring");
ABSL_FLAG(int64_t, heartbeat_ms, 2000,
          "each session's heartbeat period, milliseconds");
ABSL_FLAG(std::string, job, "",
          "start a coordinator here with this job file, or a job of this "
          "model preset (synthetic workload: proposals plan moves)");
ABSL_FLAG(std::string, coordinator_bin, "",
          "the zshard-coordinator for --job (default: next to this program)");
ABSL_FLAG(std::string, store, "",
          "the --store of the coordinator for --job, e.g. "
          "etcd:127.0.0.1:2379/zshard/loadgen (default: SQLite in a temp "
          "dir); the report then counts its store writes");
ABSL_FLAG(int64_t, lease_ms, 20000, "lease of a --job preset's job");
ABSL_FLAG(int64_t, instances, 8, "instances of a --job preset's job");
ABSL_FLAG(int64_t, kill, 0,
          "workers that go silent at once when the measurement starts");
ABSL_FLAG(int64_t, coordinator_pid, 0,
          "the coordinator's pid, to report its CPU use");
ABSL_FLAG(int64_t, connections, 8,
          "gRPC channels the sessions share for joins, plan watches and "
          "acks; heartbeats get as many channels of their own");
ABSL_FLAG(std::string, name_prefix, "loadgen-", "prefix of the workers' names");
ABSL_FLAG(bool, no_watch, false, "do not watch plans");
ABSL_FLAG(std::string, output, "text", "text or json");
ABSL_FLAG(std::string, tls_ca, "", "PEM CA of the coordinator's certificate");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM client certificate for mutual TLS (with --tls-key)");
ABSL_FLAG(std::string, tls_key, "", "PEM client key for mutual TLS");

namespace {

constexpr char kUsage[] =
    "usage: zshard-loadgen (--coordinator ADDR[,ADDR...] "
    "[--coordinator-pid PID] |\n"
    "                       --job FILE|PRESET [--coordinator-bin F] "
    "[--store SPEC])\n"
    "    [--workers 1000] [--duration-s 30] [--warmup-s 0]\n"
    "    [--heartbeat-ms 2000] [--lease-ms 20000] [--instances 8] [--kill 0]\n"
    "    [--connections 8] [--no-watch] [--output json|text]\n"
    "    [--tls-ca F] [--tls-cert F --tls-key F]\n";

constexpr int64_t kMaxInt = std::numeric_limits<int>::max();

zshard::FlagList LoadgenFlags() {
  using zshard::FlagOf;
  return {FlagOf(FLAGS_coordinator),
          FlagOf(FLAGS_workers),
          FlagOf(FLAGS_duration_s),
          FlagOf(FLAGS_warmup_s),
          FlagOf(FLAGS_heartbeat_ms),
          FlagOf(FLAGS_job),
          FlagOf(FLAGS_coordinator_bin),
          FlagOf(FLAGS_store),
          FlagOf(FLAGS_lease_ms),
          FlagOf(FLAGS_instances),
          FlagOf(FLAGS_kill),
          FlagOf(FLAGS_coordinator_pid),
          FlagOf(FLAGS_connections),
          FlagOf(FLAGS_name_prefix),
          FlagOf(FLAGS_no_watch),
          FlagOf(FLAGS_output),
          FlagOf(FLAGS_tls_ca),
          FlagOf(FLAGS_tls_cert),
          FlagOf(FLAGS_tls_key)};
}

// The flags' ranges and choices; InvalidArgument naming the flag.
absl::Status CheckFlags(const zshard::ParsedCommandLine& parsed) {
  using zshard::CheckRange;
  ZSHARD_RETURN_IF_ERROR(CheckRange(FLAGS_workers, 1, kMaxInt));
  ZSHARD_RETURN_IF_ERROR(CheckRange(FLAGS_duration_s, 1, int64_t{1} << 40));
  ZSHARD_RETURN_IF_ERROR(CheckRange(FLAGS_warmup_s, 0, int64_t{1} << 40));
  ZSHARD_RETURN_IF_ERROR(CheckRange(FLAGS_heartbeat_ms, 1, int64_t{1} << 40));
  ZSHARD_RETURN_IF_ERROR(CheckRange(FLAGS_lease_ms, 100, 3600000));
  ZSHARD_RETURN_IF_ERROR(CheckRange(FLAGS_instances, 1, 1024));
  ZSHARD_RETURN_IF_ERROR(
      CheckRange(FLAGS_kill, 0, absl::GetFlag(FLAGS_workers)));
  if (parsed.Given(FLAGS_coordinator_pid)) {
    ZSHARD_RETURN_IF_ERROR(CheckRange(FLAGS_coordinator_pid, 1, kMaxInt));
  }
  ZSHARD_RETURN_IF_ERROR(CheckRange(FLAGS_connections, 1, kMaxInt));
  const std::string output = absl::GetFlag(FLAGS_output);
  if (output != "json" && output != "text") {
    return absl::InvalidArgumentError("--output must be json or text");
  }
  const bool job = !absl::GetFlag(FLAGS_job).empty();
  if (absl::GetFlag(FLAGS_coordinator).empty() == !job) {
    return absl::InvalidArgumentError(
        "give either --coordinator HOST:PORT or --job FILE|PRESET");
  }
  if (!job) {
    ZSHARD_RETURN_IF_ERROR(
        zshard::net::ParseCoordinatorList(absl::GetFlag(FLAGS_coordinator))
            .status());
  }
  if (!job && parsed.Given(FLAGS_store)) {
    return absl::InvalidArgumentError(
        "--store goes with --job (the coordinator zshard-loadgen starts)");
  }
  if (job && parsed.Given(FLAGS_coordinator_pid)) {
    return absl::InvalidArgumentError(
        "--coordinator-pid goes with --coordinator, not --job");
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  zshard::SetBinaryMutexMode();
  const zshard::FlagList flags = LoadgenFlags();
  auto parsed = zshard::ParseCommandLine(zshard::Args(argc, argv), flags);
  if (!parsed.ok()) {
    return zshard::UsageError("zshard-loadgen", parsed.status().message());
  }
  if (parsed->help()) {
    std::printf("%s\n%s", kUsage, zshard::FlagsHelp(flags).c_str());
    return 0;
  }
  if (absl::Status s = CheckFlags(*parsed); !s.ok()) {
    return zshard::UsageError("zshard-loadgen", s.message());
  }
  std::unique_ptr<zshard::loadgen::LocalCoordinator> local;
  if (!absl::GetFlag(FLAGS_job).empty()) {
    zshard::loadgen::LocalCoordinatorOptions local_options;
    local_options.job = absl::GetFlag(FLAGS_job);
    local_options.binary = absl::GetFlag(FLAGS_coordinator_bin);
    local_options.instances = static_cast<int>(absl::GetFlag(FLAGS_instances));
    local_options.max_world = static_cast<int>(absl::GetFlag(FLAGS_workers));
    local_options.heartbeat_ms = absl::GetFlag(FLAGS_heartbeat_ms);
    local_options.lease_ms = absl::GetFlag(FLAGS_lease_ms);
    local_options.store = absl::GetFlag(FLAGS_store);
    auto started = zshard::loadgen::LocalCoordinator::Start(local_options);
    if (!started.ok()) {
      std::fprintf(stderr, "zshard-loadgen: %s\n",
                   std::string(started.status().message()).c_str());
      return 1;
    }
    local = *std::move(started);
  }
  zshard::loadgen::LoadOptions options;
  options.workers = static_cast<int>(absl::GetFlag(FLAGS_workers));
  options.duration_ms = absl::GetFlag(FLAGS_duration_s) * 1000;
  options.warmup_ms = absl::GetFlag(FLAGS_warmup_s) * 1000;
  options.heartbeat_ms = absl::GetFlag(FLAGS_heartbeat_ms);
  options.kill = static_cast<int>(absl::GetFlag(FLAGS_kill));
  options.coordinator_pid =
      local != nullptr
          ? local->pid()
          : static_cast<pid_t>(absl::GetFlag(FLAGS_coordinator_pid));
  options.name_prefix = absl::GetFlag(FLAGS_name_prefix);
  options.watch_plans = !absl::GetFlag(FLAGS_no_watch);
  zshard::net::ChannelOptions channel_options;
  channel_options.target =
      local != nullptr ? local->address() : absl::GetFlag(FLAGS_coordinator);
  channel_options.tls_ca_file = absl::GetFlag(FLAGS_tls_ca);
  channel_options.tls_cert_file = absl::GetFlag(FLAGS_tls_cert);
  channel_options.tls_key_file = absl::GetFlag(FLAGS_tls_key);
  const bool json = absl::GetFlag(FLAGS_output) == "json";
  const int connections = static_cast<int>(absl::GetFlag(FLAGS_connections));
  // Each connection has its own channel per coordinator and follows the
  // leader on its own, as separate worker processes would.
  // Heartbeats get as many connections of their own (RunLoad).
  std::vector<std::shared_ptr<zshard::net::LeaderFollower>> followers;
  std::vector<std::shared_ptr<zshard::net::LeaderFollower>> beat_followers;
  for (int c = 0; c < 2 * connections; ++c) {
    auto follower = zshard::net::LeaderFollower::Create(channel_options);
    if (!follower.ok()) {
      return zshard::UsageError("zshard-loadgen", follower.status().message());
    }
    (c < connections ? followers : beat_followers)
        .push_back(*std::move(follower));
  }
  // The store writes of the whole run (joins, transitions, leaves), when
  // the coordinator is this program's.
  std::optional<zshard::loadgen::StoreWrites> writes_before;
  if (local != nullptr) {
    auto w = local->ReadStoreWrites();
    if (!w.ok()) {
      std::fprintf(stderr, "zshard-loadgen: %s\n",
                   std::string(w.status().message()).c_str());
      return 1;
    }
    writes_before = *w;
  }
  auto report = zshard::loadgen::RunLoad(options, followers, beat_followers);
  if (!report.ok()) {
    std::fprintf(stderr, "zshard-loadgen: %s\n",
                 std::string(report.status().message()).c_str());
    return 1;
  }
  nlohmann::json out = report->ToJson();
  std::string text = report->ToText();
  if (writes_before.has_value()) {
    auto after = local->ReadStoreWrites();
    if (!after.ok()) {
      std::fprintf(stderr, "zshard-loadgen: %s\n",
                   std::string(after.status().message()).c_str());
      return 1;
    }
    const int64_t changes = after->changes - writes_before->changes;
    const int64_t transactions =
        after->transactions - writes_before->transactions;
    out["store_changes"] = changes;
    out["store_transactions"] = transactions;
    absl::StrAppend(&text, "store writes       ", changes,
                    " membership changes in ", transactions, " transactions\n");
  }
  if (json) {
    std::cout << out.dump() << std::endl;
  } else {
    std::cout << text;
  }
  return 0;
}
