// zshardctl --coordinator ADDR ledger [--output table|json]: the live
// memory ledger of a running job, predicted (the planner, ZeRO-1) next to
// measured (each rank's latest telemetry), flagging ranks that differ; a
// model-parallel job's ranks with their slot and data-parallel rank.
#include <cstdio>
#include <iostream>
#include <string>

#include "absl/strings/str_cat.h"
#include "client/ctl/commands.h"
#include "client/ctl/model_options.h"
#include "client/ctl/online.h"
#include "client/ctl/online_commands.h"
#include "client/ctl/table.h"
#include "nlohmann/json.hpp"
#include "zshard/v1/dashboard_service.grpc.pb.h"

namespace zshard::ctl {
namespace {

constexpr const char* kCategories[] = {"param", "grad", "master", "exp_avg",
                                       "exp_avg_sq"};

nlohmann::json Measured(int64_t bytes) {
  return bytes < 0 ? nlohmann::json(nullptr) : nlohmann::json(bytes);
}

}  // namespace

nlohmann::json LiveLedgerToJson(const v1::GetLedgerResponse& ledger) {
  nlohmann::json out = {{"stage", ledger.stage()},
                        {"epoch", ledger.epoch()},
                        {"world", ledger.world()},
                        {"instances", ledger.instances()},
                        {"ranks", nlohmann::json::array()}};
  for (const v1::RankLedger& r : ledger.ranks()) {
    nlohmann::json rank = {
        {"rank", r.rank()},
        {"worker", r.worker()},
        {"worker_id", r.worker_id()},
        {"predicted_bytes", r.predicted_bytes()},
        {"measured_bytes", Measured(r.measured_bytes())},
        {"comm_bytes", r.comm_bytes()},
        {"matches", r.measured_bytes() == r.predicted_bytes()},
        {"categories", nlohmann::json::object()}};
    if (r.has_slot()) {
      // A model-parallel job: the prediction is the rank's slot plan's.
      rank["slot"] = {{"tp", r.slot().tp()}, {"pp", r.slot().pp()}};
      rank["dp_rank"] = r.dp_rank();
    }
    for (const char* name : kCategories) {
      auto it = r.categories().find(name);
      if (it == r.categories().end()) continue;
      rank["categories"][name] = {
          {"predicted", it->second.predicted()},
          {"measured", Measured(it->second.measured())}};
    }
    out["ranks"].push_back(std::move(rank));
  }
  return out;
}

std::string FormatLiveLedger(const v1::GetLedgerResponse& ledger) {
  std::string out = absl::StrCat("stage ", ledger.stage(), "  epoch ",
                                 ledger.epoch(), "  world ", ledger.world(),
                                 "  instances ", ledger.instances(), "\n");
  Table table({"RANK", "WORKER", "PREDICTED", "MEASURED", "DIFF", "MASTER",
               "EXP_AVG", "EXP_AVG_SQ", "CHECK"});
  int differ = 0;
  for (const v1::RankLedger& r : ledger.ranks()) {
    auto cat = [&](const char* name) -> std::string {
      auto it = r.categories().find(name);
      if (it == r.categories().end()) return "-";
      return it->second.measured() < 0 ? HumanBytes(it->second.predicted())
                                       : HumanBytes(it->second.measured());
    };
    std::string check = "ok";
    std::string measured = "-";
    std::string diff = "-";
    if (r.measured_bytes() < 0) {
      check = "no telemetry";
    } else {
      measured = Grouped(r.measured_bytes());
      diff = Grouped(r.measured_bytes() - r.predicted_bytes());
      if (r.measured_bytes() != r.predicted_bytes()) {
        check = "DIFFERS";
        ++differ;
      }
    }
    const std::string rank =
        r.has_slot() ? absl::StrCat(r.rank(), " (tp ", r.slot().tp(), " pp ",
                                    r.slot().pp(), " dp ", r.dp_rank(), ")")
                     : absl::StrCat(r.rank());
    table.AddRow({rank, r.worker(), Grouped(r.predicted_bytes()), measured,
                  diff, cat("master"), cat("exp_avg"), cat("exp_avg_sq"),
                  check});
  }
  out += table.Render();
  if (differ > 0) {
    absl::StrAppend(&out, differ,
                    " rank(s) hold other bytes than the plan predicts\n");
  }
  return out;
}

int RunLedgerAnyCommand(const GlobalFlags& global, int argc, char** argv) {
  bool offline = global.coordinator.empty();
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--model", 0) == 0 || arg.rfind("--preset", 0) == 0 ||
        arg.rfind("--job", 0) == 0) {
      offline = true;
    }
  }
  return offline ? RunLedgerCommand(global, argc, argv)
                 : RunOnlineLedger(global, argc, argv);
}

int RunOnlineLedger(const GlobalFlags& global, int argc, char** argv) {
  absl::StatusOr<OnlineArgs> args = ParseOnlineArgs(global, argc, argv, {});
  if (!args.ok()) return ReportError("ledger", args.status());
  if (args->parsed.help()) {
    return PrintUsage(
        "usage: zshardctl --coordinator HOST:PORT ledger "
        "[--output table|json] [--tls-ca F] [--tls-cert F --tls-key F] "
        "[--timeout-ms N]\n",
        *args);
  }
  auto coordinators = Connect(*args);
  if (!coordinators.ok()) return ReportError("ledger", coordinators.status());
  v1::GetLedgerResponse resp;
  grpc::Status s = CallLeader<v1::DashboardService>(
      **coordinators, *args,
      [&](v1::DashboardService::Stub& stub, grpc::ClientContext* context) {
        return stub.GetLedger(context, v1::GetLedgerRequest(), &resp);
      });
  if (!s.ok()) return ReportRpcError("ledger", *args, s);
  if (args->json) {
    std::cout << LiveLedgerToJson(resp).dump() << std::endl;
  } else {
    std::cout << FormatLiveLedger(resp);
  }
  return 0;
}

}  // namespace zshard::ctl
