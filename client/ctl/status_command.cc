// zshardctl status: DashboardService.GetClusterStatus, printed.

#include "client/ctl/status_command.h"

#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/ctl/online_commands.h"
#include "common/net/channel.h"
#include "grpcpp/client_context.h"
#include "zshard/v1/dashboard_service.grpc.pb.h"

namespace zshard::ctl {
namespace {

int UsageError(const std::string& message) {
  std::fprintf(stderr, "zshardctl status: %s\n", message.c_str());
  return 2;
}

}  // namespace

nlohmann::json ClusterStatusToJson(const v1::GetClusterStatusResponse& status) {
  nlohmann::json out;
  out["job"] = status.job();
  out["epoch"] = status.epoch();
  out["state"] = status.state() == v1::CLUSTER_STATE_TRANSITIONING
                     ? "TRANSITIONING"
                     : "STABLE";
  out["world"] = status.world();
  out["instances"] = status.instances();
  out["plan_hash"] = status.plan_hash();
  out["members"] = nlohmann::json::array();
  for (const v1::MemberStatus& m : status.members()) {
    nlohmann::json member;
    member["name"] = m.name();
    member["worker_id"] = m.worker_id();
    member["state"] = MemberStateName(m.state());
    member["rank"] = m.rank();
    member["instance"] = m.instance();
    member["shard_rank"] = m.shard_rank();
    member["step"] = m.step();
    member["last_heartbeat_ms"] = m.last_heartbeat_ms();
    member["labels"] = nlohmann::json::object();
    for (const auto& [key, value] : m.labels()) member["labels"][key] = value;
    out["members"].push_back(member);
  }
  return out;
}

std::string FormatClusterStatus(const v1::GetClusterStatusResponse& status) {
  nlohmann::json j = ClusterStatusToJson(status);
  std::string out = absl::StrFormat(
      "job %s  epoch %d  %s  world %d  instances %d  plan %s\n", status.job(),
      status.epoch(), j["state"].get<std::string>(), status.world(),
      status.instances(),
      status.plan_hash().empty() ? "-" : status.plan_hash());
  absl::StrAppendFormat(&out, "%-20s %-9s %5s %8s %10s %8s %14s  %s\n", "NAME",
                        "STATE", "RANK", "INSTANCE", "SHARD_RANK", "STEP",
                        "HEARTBEAT_MS", "LABELS");
  for (const v1::MemberStatus& m : status.members()) {
    std::vector<std::string> labels;
    for (const auto& [key, value] : m.labels()) {
      labels.push_back(absl::StrCat(key, "=", value));
    }
    std::sort(labels.begin(), labels.end());
    absl::StrAppendFormat(&out, "%-20s %-9s %5d %8d %10d %8d %14d  %s\n",
                          m.name(), MemberStateName(m.state()), m.rank(),
                          m.instance(), m.shard_rank(), m.step(),
                          m.last_heartbeat_ms(), absl::StrJoin(labels, ","));
  }
  return out;
}

int RunStatusArgs(const std::vector<std::string>& args) {
  net::ChannelOptions channel_options;
  bool json = false;
  int64_t timeout_ms = 5000;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i];
    if (flag == "status") continue;
    if (flag == "--help" || flag == "-h") {
      std::printf(
          "usage: zshardctl --coordinator HOST:PORT status "
          "[--output table|json] [--tls-ca F] [--tls-cert F --tls-key F] "
          "[--timeout-ms N]\n");
      return 0;
    }
    std::optional<std::string> value;
    if (size_t eq = flag.find('='); eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      return UsageError(absl::StrCat("flag ", flag, " needs a value"));
    }
    if (flag == "--coordinator") {
      channel_options.target = *value;
    } else if (flag == "--output") {
      if (*value != "json" && *value != "table") {
        return UsageError("--output must be json or table");
      }
      json = *value == "json";
    } else if (flag == "--tls-ca") {
      channel_options.tls_ca_file = *value;
    } else if (flag == "--tls-cert") {
      channel_options.tls_cert_file = *value;
    } else if (flag == "--tls-key") {
      channel_options.tls_key_file = *value;
    } else if (flag == "--timeout-ms") {
      if (!absl::SimpleAtoi(*value, &timeout_ms) || timeout_ms <= 0) {
        return UsageError("--timeout-ms must be a positive integer");
      }
    } else {
      return UsageError(absl::StrCat("unknown flag ", flag));
    }
  }
  if (channel_options.target.empty()) {
    return UsageError("--coordinator HOST:PORT is required");
  }
  auto channel = net::MakeCoordinatorChannel(channel_options);
  if (!channel.ok()) return UsageError(std::string(channel.status().message()));
  auto stub = v1::DashboardService::NewStub(*channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::milliseconds(timeout_ms));
  v1::GetClusterStatusResponse response;
  grpc::Status status = stub->GetClusterStatus(
      &context, v1::GetClusterStatusRequest(), &response);
  if (!status.ok()) {
    const bool unreachable =
        status.error_code() == grpc::StatusCode::UNAVAILABLE ||
        status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
    std::fprintf(stderr, "zshardctl status: coordinator %s %s: %s\n",
                 channel_options.target.c_str(),
                 unreachable ? "unreachable" : "refused the request",
                 status.error_message().c_str());
    return unreachable ? 3 : 1;
  }
  if (json) {
    std::cout << ClusterStatusToJson(response).dump() << std::endl;
  } else {
    std::cout << FormatClusterStatus(response);
  }
  return 0;
}

int RunStatusCommand(const GlobalFlags& global, int argc, char** argv) {
  std::vector<std::string> args;
  const std::pair<const char*, const std::string*> globals[] = {
      {"--coordinator", &global.coordinator},
      {"--tls-ca", &global.tls_ca},
      {"--tls-cert", &global.tls_cert},
      {"--tls-key", &global.tls_key}};
  for (const auto& [flag, value] : globals) {
    if (!value->empty()) {
      args.emplace_back(flag);
      args.push_back(*value);
    }
  }
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  return RunStatusArgs(args);
}

}  // namespace zshard::ctl
