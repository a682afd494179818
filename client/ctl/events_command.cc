// zshardctl --coordinator ADDR events [--follow] [--output table|json]:
// the coordinator's event log (membership changes and transitions with
// their reasons), oldest first; --follow keeps printing new events.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/ctl/commands.h"
#include "client/ctl/model_options.h"
#include "client/ctl/online.h"
#include "client/ctl/online_commands.h"
#include "client/ctl/progress.h"
#include "common/clock.h"
#include "nlohmann/json.hpp"
#include "zshard/v1/dashboard_service.grpc.pb.h"

ABSL_FLAG(bool, follow, false, "keep printing new events as they come");

namespace zshard::ctl {
namespace {

constexpr char kUsage[] =
    "usage: zshardctl --coordinator HOST:PORT events [--follow]\n"
    "         [--output table|json] [--tls-ca F] [--tls-cert F --tls-key F]\n"
    "         [--timeout-ms N]\n";

nlohmann::json EventJson(const v1::Event& e) {
  return {{"time", Rfc3339(e.time_ms())},
          {"epoch", e.epoch()},
          {"kind", e.kind()},
          {"reason", e.reason()},
          {"seq", e.seq()}};
}

std::string EventLine(const v1::Event& e) {
  return absl::StrFormat("%-24s %6d  %-10s %s\n", Rfc3339(e.time_ms()),
                         e.epoch(), e.kind(), e.reason());
}

}  // namespace

int RunEventsCommand(const GlobalFlags& global, int argc, char** argv) {
  absl::StatusOr<OnlineArgs> args =
      ParseOnlineArgs(global, argc, argv, {FlagOf(FLAGS_follow)});
  if (!args.ok()) return ReportError("events", args.status());
  if (args->parsed.help()) return PrintUsage(kUsage, *args);
  const bool follow = absl::GetFlag(FLAGS_follow);
  auto coordinators = Connect(*args);
  if (!coordinators.ok()) return ReportError("events", coordinators.status());

  std::vector<v1::Event> events;
  v1::ListEventsRequest req;
  req.set_page_size(1000);
  Progress progress("events", DefaultProgressOptions());
  while (true) {
    v1::ListEventsResponse resp;
    grpc::Status s = CallLeader<v1::DashboardService>(
        **coordinators, *args,
        [&](v1::DashboardService::Stub& stub, grpc::ClientContext* context) {
          return stub.ListEvents(context, req, &resp);
        });
    if (!s.ok()) return ReportRpcError("events", *args, s);
    events.insert(events.end(), resp.events().begin(), resp.events().end());
    req.set_after_seq(resp.next_seq());
    if (!resp.more()) break;
    progress.Update(absl::StrCat("fetched ", events.size(), " events"));
  }
  progress.Done();
  if (!follow && args->json) {
    nlohmann::json out = nlohmann::json::array();
    for (const v1::Event& e : events) out.push_back(EventJson(e));
    std::cout << out.dump() << std::endl;
    return 0;
  }
  if (!args->json) {
    std::cout << absl::StrFormat("%-24s %6s  %-10s %s\n", "TIME", "EPOCH",
                                 "KIND", "REASON");
  }
  auto print = [&](const v1::Event& e) {
    if (args->json) {
      std::cout << EventJson(e).dump() << "\n";
    } else {
      std::cout << EventLine(e);
    }
  };
  for (const v1::Event& e : events) print(e);
  std::cout.flush();
  if (!follow) return 0;

  // The stream follows the leader: when it ends for want of one (a
  // failover), it is opened again after the last event printed, on the
  // leader named or the next coordinator, for up to --timeout-ms.
  v1::WatchEventsRequest watch;
  watch.set_after_seq(req.after_seq());
  int64_t failing_since_ms = -1;
  while (true) {
    const net::LeaderFollower::Pick pick = (*coordinators)->Current();
    const int64_t opened_ms = RealClock::Get()->NowMs();
    auto stub = v1::DashboardService::NewStub(pick.channel);
    auto ctx = CallContext(*args, /*stream=*/true);
    auto stream = stub->WatchEvents(ctx.get(), watch);
    v1::Event e;
    while (stream->Read(&e)) {
      failing_since_ms = -1;
      print(e);
      std::cout.flush();
      watch.set_after_seq(e.seq());
    }
    const grpc::Status status = stream->Finish();
    const net::LeaderFollower::Move move =
        (*coordinators)->OnFailure(pick, status, *ctx);
    const int64_t now = RealClock::Get()->NowMs();
    // A stream that ran a while counts as a success, events or not.
    if (failing_since_ms < 0 || now - opened_ms >= args->timeout_ms) {
      failing_since_ms = now;
    }
    if (move == net::LeaderFollower::Move::kStayed ||
        now - failing_since_ms >= args->timeout_ms) {
      return ReportRpcError("events", *args, status);
    }
    // A round-robin move waits a little: the coordinators may be electing.
    if (move == net::LeaderFollower::Move::kToNext) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
}

}  // namespace zshard::ctl
