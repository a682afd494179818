// zshardctl --coordinator ADDR explain [--output table|json]: why the
// world, the ranks and the spares of a running job are what they are.
#include <cstdio>
#include <iostream>

#include "client/ctl/commands.h"
#include "client/ctl/model_options.h"
#include "client/ctl/online.h"
#include "client/ctl/online_commands.h"
#include "nlohmann/json.hpp"
#include "zshard/v1/dashboard_service.grpc.pb.h"

namespace zshard::ctl {

int RunExplainCommand(const GlobalFlags& global, int argc, char** argv) {
  absl::StatusOr<OnlineArgs> args = ParseOnlineArgs(global, argc, argv, {});
  if (!args.ok()) return ReportError("explain", args.status());
  if (args->parsed.help()) {
    return PrintUsage(
        "usage: zshardctl --coordinator HOST:PORT explain "
        "[--output table|json] [--tls-ca F] [--tls-cert F --tls-key F] "
        "[--timeout-ms N]\n",
        *args);
  }
  auto coordinators = Connect(*args);
  if (!coordinators.ok()) return ReportError("explain", coordinators.status());
  v1::ExplainResponse resp;
  grpc::Status s = CallLeader<v1::DashboardService>(
      **coordinators, *args,
      [&](v1::DashboardService::Stub& stub, grpc::ClientContext* context) {
        return stub.Explain(context, v1::ExplainRequest(), &resp);
      });
  if (!s.ok()) return ReportRpcError("explain", *args, s);
  if (args->json) {
    nlohmann::json out = {{"sentences", nlohmann::json::array()}};
    for (const std::string& line : resp.sentences()) {
      out["sentences"].push_back(line);
    }
    std::cout << out.dump() << std::endl;
  } else {
    for (const std::string& line : resp.sentences()) {
      std::cout << line << "\n";
    }
  }
  return 0;
}

}  // namespace zshard::ctl
