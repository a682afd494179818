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
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/net/channel.h"
#include "tools/loadgen/load_generator.h"

namespace {

int Usage(const std::string& message) {
  std::fprintf(stderr, "zshard-loadgen: %s\n", message.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  zshard::loadgen::LoadOptions options;
  zshard::net::ChannelOptions channel_options;
  bool json = false;
  int64_t duration_s = 30;
  int connections = 8;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag == "--no-watch") {
      options.watch_plans = false;
      continue;
    }
    std::optional<std::string> value;
    if (size_t eq = flag.find('='); eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return Usage(absl::StrCat("flag ", flag, " needs a value"));
    }
    int64_t number = 0;
    const bool is_number = absl::SimpleAtoi(*value, &number);
    if (flag == "--coordinator") {
      channel_options.target = *value;
    } else if (flag == "--workers" && is_number && number > 0) {
      options.workers = static_cast<int>(number);
    } else if (flag == "--duration-s" && is_number && number > 0) {
      duration_s = number;
    } else if (flag == "--warmup-s" && is_number && number >= 0) {
      options.warmup_ms = number * 1000;
    } else if (flag == "--heartbeat-interval-ms" && is_number && number > 0) {
      options.heartbeat_interval_ms = number;
    } else if (flag == "--coordinator-pid" && is_number && number > 0) {
      options.coordinator_pid = static_cast<pid_t>(number);
    } else if (flag == "--connections" && is_number && number > 0) {
      connections = static_cast<int>(number);
    } else if (flag == "--name-prefix") {
      options.name_prefix = *value;
    } else if (flag == "--output" && (*value == "json" || *value == "text")) {
      json = *value == "json";
    } else if (flag == "--tls-ca") {
      channel_options.tls_ca_file = *value;
    } else if (flag == "--tls-cert") {
      channel_options.tls_cert_file = *value;
    } else if (flag == "--tls-key") {
      channel_options.tls_key_file = *value;
    } else {
      return Usage(absl::StrCat("bad flag ", flag, " '", *value, "'"));
    }
  }
  if (channel_options.target.empty()) {
    return Usage("--coordinator HOST:PORT is required");
  }
  options.duration_ms = duration_s * 1000;
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int c = 0; c < connections; ++c) {
    auto channel = zshard::net::MakeCoordinatorChannel(channel_options);
    if (!channel.ok()) return Usage(std::string(channel.status().message()));
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
