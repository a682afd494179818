// zshardctl status: DashboardService.GetClusterStatus, printed.

#include "client/ctl/status_command.h"

#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/ctl/online.h"
#include "client/ctl/online_commands.h"
#include "client/ctl/shared_flags.h"
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
  out["leader"] = status.leader().empty() ? nlohmann::json(nullptr)
                                          : nlohmann::json(status.leader());
  out["standbys"] = nlohmann::json::array();
  for (const std::string& standby : status.standbys()) {
    out["standbys"].push_back(standby);
  }
  out["isolated"] = status.isolated();
  out["isolated_ms"] = status.isolated_ms();
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
    member["suspect"] = m.suspect();
    member["quarantine"] = m.quarantine();
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
  absl::StrAppendFormat(
      &out, "leader %s  standbys %s\n",
      status.leader().empty() ? "-" : status.leader(),
      status.standbys().empty() ? "-" : absl::StrJoin(status.standbys(), ","));
  if (status.isolated()) {
    absl::StrAppendFormat(
        &out,
        "ISOLATED for %d ms: most members are silent past their lease; no "
        "one is declared dead until they are back\n",
        status.isolated_ms());
  }
  absl::StrAppendFormat(&out, "%-20s %-9s %5s %8s %10s %8s %14s  %s\n", "NAME",
                        "STATE", "RANK", "INSTANCE", "SHARD_RANK", "STEP",
                        "HEARTBEAT_MS", "LABELS");
  for (const v1::MemberStatus& m : status.members()) {
    std::vector<std::string> labels;
    for (const auto& [key, value] : m.labels()) {
      labels.push_back(absl::StrCat(key, "=", value));
    }
    std::sort(labels.begin(), labels.end());
    const std::string state =
        absl::StrCat(MemberStateName(m.state()), m.suspect() ? "?" : "");
    absl::StrAppendFormat(&out, "%-20s %-9s %5d %8d %10d %8d %14d  %s\n",
                          m.name(), state, m.rank(), m.instance(),
                          m.shard_rank(), m.step(), m.last_heartbeat_ms(),
                          absl::StrJoin(labels, ","));
  }
  for (const v1::MemberStatus& m : status.members()) {
    if (m.quarantine().empty()) continue;
    absl::StrAppendFormat(&out, "quarantined: %s %s\n", m.name(),
                          m.quarantine());
  }
  return out;
}

int RunStatusCommand(const GlobalFlags& global, int argc, char** argv) {
  // --coordinator may also come after the command.
  absl::StatusOr<OnlineArgs> args =
      ParseOnlineArgs(global, argc, argv, {FlagOf(FLAGS_coordinator)});
  if (!args.ok()) return UsageError(std::string(args.status().message()));
  if (args->parsed.help()) {
    return PrintUsage(
        "usage: zshardctl --coordinator HOST:PORT[,HOST:PORT...] status "
        "[--output table|json] [--tls-ca F] [--tls-cert F --tls-key F] "
        "[--timeout-ms N]\n",
        *args);
  }
  const net::ChannelOptions& channel_options = args->channel;
  auto coordinators = Connect(*args);
  if (!coordinators.ok()) {
    return UsageError(std::string(coordinators.status().message()));
  }
  v1::GetClusterStatusResponse response;
  grpc::Status status = CallLeader<v1::DashboardService>(
      **coordinators, *args,
      [&](v1::DashboardService::Stub& stub, grpc::ClientContext* context) {
        return stub.GetClusterStatus(context, v1::GetClusterStatusRequest(),
                                     &response);
      });
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
  if (args->json) {
    std::cout << ClusterStatusToJson(response).dump() << std::endl;
  } else {
    std::cout << FormatClusterStatus(response);
  }
  return 0;
}

}  // namespace zshard::ctl
