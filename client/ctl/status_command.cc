// zshardctl status: DashboardService.GetClusterStatus, printed.

#include "client/ctl/status_command.h"

#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/ctl/online.h"
#include "client/ctl/online_commands.h"
#include "client/ctl/shared_flags.h"
#include "common/net/channel.h"
#include "common/plan/parallel.h"
#include "grpcpp/client_context.h"
#include "zshard/v1/dashboard_service.grpc.pb.h"

namespace zshard::ctl {
namespace {

int UsageError(const std::string& message) {
  std::fprintf(stderr, "zshardctl status: %s\n", message.c_str());
  return 2;
}

// The job's model-parallel sizes, or nullopt without model parallelism.
std::optional<plan::ParallelSizes> SizesOf(
    const v1::GetClusterStatusResponse& status) {
  if (!status.has_parallel()) return std::nullopt;
  plan::ParallelSizes s{status.parallel().tensor(),
                        status.parallel().pipeline(),
                        status.parallel().context()};
  if (!s.model_parallel() || s.tensor < 1 || s.pipeline < 1 || s.context < 1) {
    return std::nullopt;
  }
  return s;
}

// A ranked member's place in a model-parallel world; nullopt for a spare
// or when the world is not a multiple of the replica's size.
std::optional<plan::Position> PositionOfMember(
    const v1::GetClusterStatusResponse& status, const v1::MemberStatus& m) {
  std::optional<plan::ParallelSizes> sizes = SizesOf(status);
  if (!sizes.has_value() || m.rank() < 0 || m.rank() >= status.world() ||
      !plan::CheckParallelWorld(*sizes, status.world()).ok()) {
    return std::nullopt;
  }
  return plan::PositionOf(*sizes, status.world(), m.rank());
}

// "r0 tp1 pp0 cp0", or "-".
std::string PositionText(const std::optional<plan::Position>& p) {
  if (!p.has_value()) return "-";
  return absl::StrCat("r", p->replica, " tp", p->tp, " pp", p->pp, " cp",
                      p->cp);
}

// One line per slot: its ranks' members in data-parallel rank order.
std::string FormatSlots(const v1::GetClusterStatusResponse& status) {
  std::optional<plan::ParallelSizes> sizes = SizesOf(status);
  if (!sizes.has_value() ||
      !plan::CheckParallelWorld(*sizes, status.world()).ok()) {
    return "";
  }
  std::vector<std::vector<std::string>> slots(
      static_cast<size_t>(sizes->slots()),
      std::vector<std::string>(
          static_cast<size_t>(plan::DataParallelSize(*sizes, status.world()))));
  for (const v1::MemberStatus& m : status.members()) {
    std::optional<plan::Position> p = PositionOfMember(status, m);
    if (!p.has_value()) continue;
    slots[static_cast<size_t>(plan::SlotIndex(*sizes, p->tp, p->pp))]
         [static_cast<size_t>(plan::DataParallelRank(*sizes, *p))] = m.name();
  }
  std::string out = absl::StrFormat(
      "model-parallel: tensor %d  pipeline %d  context %d  replicas %d\n",
      sizes->tensor, sizes->pipeline, sizes->context,
      plan::Replicas(*sizes, status.world()));
  for (size_t s = 0; s < slots.size(); ++s) {
    absl::StrAppendFormat(&out, "slot (tp %d, pp %d): data-parallel ranks %s\n",
                          plan::SlotTp(*sizes, static_cast<int>(s)),
                          plan::SlotPp(*sizes, static_cast<int>(s)),
                          absl::StrJoin(slots[s], " "));
  }
  return out;
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
  if (std::optional<plan::ParallelSizes> sizes = SizesOf(status)) {
    out["parallel"] = {{"tensor", sizes->tensor},
                       {"pipeline", sizes->pipeline},
                       {"context", sizes->context}};
  }
  out["members"] = nlohmann::json::array();
  for (const v1::MemberStatus& m : status.members()) {
    nlohmann::json member;
    if (std::optional<plan::Position> p = PositionOfMember(status, m)) {
      const plan::ParallelSizes sizes = *SizesOf(status);
      member["position"] = {{"replica", p->replica},
                            {"tp", p->tp},
                            {"pp", p->pp},
                            {"cp", p->cp},
                            {"slot", plan::SlotIndex(sizes, p->tp, p->pp)},
                            {"dp_rank", plan::DataParallelRank(sizes, *p)}};
    }
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
  // A model-parallel job's members show their place (replica, tp, pp, cp);
  // instance and shard rank are then inside the slot's data-parallel
  // domain.
  const bool parallel = SizesOf(status).has_value();
  absl::StrAppend(&out, FormatSlots(status));
  absl::StrAppendFormat(
      &out, "%-20s %-9s %5s %s%8s %10s %8s %14s  %s\n", "NAME", "STATE", "RANK",
      parallel ? absl::StrFormat("%-15s ", "POSITION") : "", "INSTANCE",
      "SHARD_RANK", "STEP", "HEARTBEAT_MS", "LABELS");
  for (const v1::MemberStatus& m : status.members()) {
    std::vector<std::string> labels;
    for (const auto& [key, value] : m.labels()) {
      labels.push_back(absl::StrCat(key, "=", value));
    }
    std::sort(labels.begin(), labels.end());
    const std::string state =
        absl::StrCat(MemberStateName(m.state()), m.suspect() ? "?" : "");
    const std::string position =
        parallel ? absl::StrFormat("%-15s ",
                                   PositionText(PositionOfMember(status, m)))
                 : "";
    absl::StrAppendFormat(&out, "%-20s %-9s %5d %s%8d %10d %8d %14d  %s\n",
                          m.name(), state, m.rank(), position, m.instance(),
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
