// zshardctl --coordinator ADDR reshards [--limit N] [--output table|json]:
// the job's re-shard history (DashboardService.GetReshardHistory), oldest
// first: epochs, world before and after, moves, bytes moved against the
// lower bound, checkpoint source, duration, outcome and reason.
#include <cstdio>
#include <iostream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/ctl/commands.h"
#include "client/ctl/model_options.h"
#include "client/ctl/online.h"
#include "client/ctl/online_commands.h"
#include "client/ctl/table.h"
#include "zshard/v1/dashboard_service.grpc.pb.h"

ABSL_FLAG(int64_t, limit, 100, "the latest re-shards shown");

namespace zshard::ctl {
namespace {

constexpr char kUsage[] =
    "usage: zshardctl --coordinator HOST:PORT reshards [--limit N]\n"
    "         [--output table|json] [--tls-ca F] [--tls-cert F --tls-key F]\n"
    "         [--timeout-ms N]\n";

// "1.00" when every moved byte was needed; "-" when nothing had to move.
std::string MovedOverBound(const v1::MoveSummary& m) {
  if (m.lower_bound_bytes() <= 0) return m.bytes_moved() == 0 ? "-" : "inf";
  return absl::StrFormat("%.2f",
                         static_cast<double>(m.bytes_moved()) /
                             static_cast<double>(m.lower_bound_bytes()));
}

std::string Duration(const v1::Reshard& r) {
  if (r.duration_ms() <= 0) return "-";
  return absl::StrFormat("%.2fs", r.duration_ms() / 1000.0);
}

}  // namespace

nlohmann::json ReshardsToJson(const v1::GetReshardHistoryResponse& resp) {
  nlohmann::json out = nlohmann::json::array();
  for (const v1::Reshard& r : resp.reshards()) {
    const v1::MoveSummary& m = r.summary();
    nlohmann::json j = {{"epoch", r.epoch()},
                        {"base_epoch", r.base_epoch()},
                        {"time", Rfc3339(r.proposed_ms())},
                        {"reason", r.reason()},
                        {"world_before", r.world_before()},
                        {"world_after", r.world_after()},
                        {"instances", r.instances()},
                        {"moves", m.moves()},
                        {"bytes_moved", m.bytes_moved()},
                        {"lower_bound_bytes", m.lower_bound_bytes()},
                        {"bytes_from_checkpoint", m.bytes_from_checkpoint()},
                        {"bytes_same_node", m.bytes_same_node()},
                        {"restored_step", nullptr},
                        {"duration_ms", r.duration_ms()},
                        {"outcome", r.outcome()}};
    if (r.restored_step() > 0) j["restored_step"] = r.restored_step();
    out.push_back(std::move(j));
  }
  return out;
}

std::string FormatReshards(const v1::GetReshardHistoryResponse& resp) {
  if (resp.reshards_size() == 0) return "no re-shards yet\n";
  Table table({"TIME", "EPOCH", "BASE", "WORLD", "MOVES", "BYTES_MOVED",
               "LOWER_BOUND", "RATIO", "FROM_CKPT", "DURATION", "OUTCOME",
               "REASON"});
  table.LeftAlign(10);
  table.LeftAlign(11);
  for (const v1::Reshard& r : resp.reshards()) {
    const v1::MoveSummary& m = r.summary();
    table.AddRow(
        {Rfc3339(r.proposed_ms()), absl::StrCat(r.epoch()),
         absl::StrCat(r.base_epoch()),
         absl::StrCat(r.world_before(), "->", r.world_after()),
         absl::StrCat(m.moves()), Grouped(m.bytes_moved()),
         Grouped(m.lower_bound_bytes()), MovedOverBound(m),
         r.restored_step() > 0 ? absl::StrCat("step ", r.restored_step()) : "-",
         Duration(r), r.outcome(), r.reason()});
  }
  return table.Render();
}

int RunReshardsCommand(const GlobalFlags& global, int argc, char** argv) {
  absl::StatusOr<OnlineArgs> args =
      ParseOnlineArgs(global, argc, argv, {FlagOf(FLAGS_limit)});
  if (!args.ok()) return ReportError("reshards", args.status());
  if (args->parsed.help()) return PrintUsage(kUsage, *args);
  if (absl::Status s = CheckRange(FLAGS_limit, 1, 100000); !s.ok()) {
    return ReportError("reshards", s);
  }
  auto coordinators = Connect(*args);
  if (!coordinators.ok()) return ReportError("reshards", coordinators.status());
  v1::GetReshardHistoryRequest req;
  req.set_limit(static_cast<int32_t>(absl::GetFlag(FLAGS_limit)));
  v1::GetReshardHistoryResponse resp;
  grpc::Status s = CallLeader<v1::DashboardService>(
      **coordinators, *args,
      [&](v1::DashboardService::Stub& stub, grpc::ClientContext* context) {
        return stub.GetReshardHistory(context, req, &resp);
      });
  if (!s.ok()) return ReportRpcError("reshards", *args, s);
  if (args->json) {
    std::cout << ReshardsToJson(resp).dump() << std::endl;
  } else {
    std::cout << FormatReshards(resp);
  }
  return 0;
}

}  // namespace zshard::ctl
