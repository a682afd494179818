// zshard-loadgen: simulates many worker sessions against a coordinator and
// prints heartbeat latency percentiles and the coordinator's CPU use.
//
//   zshard-loadgen --coordinator ADDR --workers 1000 --duration-s 30
//       [--warmup-s 0] [--coordinator-pid PID] [--heartbeat-interval-ms 1000]
//       [--connections 8] [--no-watch] [--output json|text]
//       [--tls-ca F] [--tls-cert F --tls-key F]
//
// Exit status: 0 done, 1 the run failed, 2 bad flags.

#include <cstdio>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "common/flags.h"
#include "common/net/channel.h"
#include "common/status.h"
#include "tools/loadgen/load_generator.h"

ABSL_FLAG(std::string, coordinator, "", "HOST:PORT of the coordinator");
ABSL_FLAG(int64_t, workers, 1000, "simulated worker sessions");
ABSL_FLAG(int64_t, duration_s, 30, "measured seconds");
ABSL_FLAG(int64_t, warmup_s, 0, "seconds of load before measuring");
ABSL_FLAG(int64_t, heartbeat_interval_ms, 1000,
          "each session's heartbeat period, milliseconds");
ABSL_FLAG(int64_t, coordinator_pid, 0,
          "the coordinator's pid, to report its CPU use");
ABSL_FLAG(int64_t, connections, 8, "gRPC channels the sessions share");
ABSL_FLAG(std::string, name_prefix, "loadgen-", "prefix of the workers' names");
ABSL_FLAG(bool, no_watch, false, "do not watch plans");
ABSL_FLAG(std::string, output, "text", "text or json");
ABSL_FLAG(std::string, tls_ca, "", "PEM CA of the coordinator's certificate");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM client certificate for mutual TLS (with --tls-key)");
ABSL_FLAG(std::string, tls_key, "", "PEM client key for mutual TLS");

namespace {

constexpr char kUsage[] =
    "usage: zshard-loadgen --coordinator ADDR --workers 1000 --duration-s 30\n"
    "    [--warmup-s 0] [--coordinator-pid PID] [--heartbeat-interval-ms "
    "1000]\n"
    "    [--connections 8] [--no-watch] [--output json|text]\n"
    "    [--tls-ca F] [--tls-cert F --tls-key F]\n";

constexpr int64_t kMaxInt = std::numeric_limits<int>::max();

zshard::FlagList LoadgenFlags() {
  using zshard::FlagOf;
  return {FlagOf(FLAGS_coordinator),
          FlagOf(FLAGS_workers),
          FlagOf(FLAGS_duration_s),
          FlagOf(FLAGS_warmup_s),
          FlagOf(FLAGS_heartbeat_interval_ms),
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
  ZSHARD_RETURN_IF_ERROR(
      CheckRange(FLAGS_heartbeat_interval_ms, 1, int64_t{1} << 40));
  if (parsed.Given(FLAGS_coordinator_pid)) {
    ZSHARD_RETURN_IF_ERROR(CheckRange(FLAGS_coordinator_pid, 1, kMaxInt));
  }
  ZSHARD_RETURN_IF_ERROR(CheckRange(FLAGS_connections, 1, kMaxInt));
  const std::string output = absl::GetFlag(FLAGS_output);
  if (output != "json" && output != "text") {
    return absl::InvalidArgumentError("--output must be json or text");
  }
  if (absl::GetFlag(FLAGS_coordinator).empty()) {
    return absl::InvalidArgumentError("--coordinator HOST:PORT is required");
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
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
  zshard::loadgen::LoadOptions options;
  options.workers = static_cast<int>(absl::GetFlag(FLAGS_workers));
  options.duration_ms = absl::GetFlag(FLAGS_duration_s) * 1000;
  options.warmup_ms = absl::GetFlag(FLAGS_warmup_s) * 1000;
  options.heartbeat_interval_ms = absl::GetFlag(FLAGS_heartbeat_interval_ms);
  options.coordinator_pid =
      static_cast<pid_t>(absl::GetFlag(FLAGS_coordinator_pid));
  options.name_prefix = absl::GetFlag(FLAGS_name_prefix);
  options.watch_plans = !absl::GetFlag(FLAGS_no_watch);
  zshard::net::ChannelOptions channel_options;
  channel_options.target = absl::GetFlag(FLAGS_coordinator);
  channel_options.tls_ca_file = absl::GetFlag(FLAGS_tls_ca);
  channel_options.tls_cert_file = absl::GetFlag(FLAGS_tls_cert);
  channel_options.tls_key_file = absl::GetFlag(FLAGS_tls_key);
  const bool json = absl::GetFlag(FLAGS_output) == "json";
  const int connections = static_cast<int>(absl::GetFlag(FLAGS_connections));
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int c = 0; c < connections; ++c) {
    auto channel = zshard::net::MakeCoordinatorChannel(channel_options);
    if (!channel.ok()) {
      return zshard::UsageError("zshard-loadgen", channel.status().message());
    }
    channels.push_back(*channel);
  }
  auto report = zshard::loadgen::RunLoad(options, channels);
  if (!report.ok()) {
    std::fprintf(stderr, "zshard-loadgen: %s\n",
                 std::string(report.status().message()).c_str());
    return 1;
  }
  if (json) {
    std::cout << report->ToJson().dump() << std::endl;
  } else {
    std::cout << report->ToText();
  }
  return 0;
}
