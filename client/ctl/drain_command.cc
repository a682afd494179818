// zshardctl --coordinator ADDR [--token-file F] drain NAME [--wait]: asks
// the coordinator (AdminService.DrainWorker, behind the admin token) to
// drain a worker: it hands its optimizer state over at the next step
// boundary and exits. --wait follows the member until it has left.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "client/ctl/commands.h"
#include "client/ctl/model_options.h"
#include "client/ctl/online.h"
#include "client/ctl/online_commands.h"
#include "client/ctl/progress.h"
#include "client/ctl/shared_flags.h"
#include "common/clock.h"
#include "nlohmann/json.hpp"
#include "zshard/v1/admin_service.grpc.pb.h"
#include "zshard/v1/dashboard_service.grpc.pb.h"

ABSL_FLAG(bool, wait, false, "follow the worker until it has left");
ABSL_FLAG(int64_t, wait_timeout_s, 600, "how long --wait waits, seconds");

namespace zshard::ctl {
namespace {

constexpr char kUsage[] =
    "usage: zshardctl --coordinator HOST:PORT [--token-file F] drain NAME\n"
    "         [--wait [--wait-timeout-s N]] [--token-file F]\n"
    "         [--output table|json] [--tls-ca F] [--tls-cert F --tls-key F]\n"
    "         [--timeout-ms N]\n"
    "The admin token file may also come from $ZSHARD_ADMIN_TOKEN_FILE.\n";

// How often --wait looks at the member.
constexpr int64_t kPollMs = 200;

const v1::MemberStatus* FindMember(const v1::GetClusterStatusResponse& status,
                                   const std::string& name) {
  const v1::MemberStatus* found = nullptr;
  // A name may have older incarnations (DEAD, LEFT); the live one is listed
  // first, so the first match is the one being drained.
  for (const v1::MemberStatus& m : status.members()) {
    if (m.name() == name && found == nullptr) found = &m;
  }
  return found;
}

// What the drain waits for now, in words.
std::string Waiting(const v1::GetClusterStatusResponse& status,
                    const v1::MemberStatus& m) {
  std::string out =
      absl::StrCat("worker ", m.name(), " is ", MemberStateName(m.state()));
  if (m.rank() >= 0) absl::StrAppend(&out, " (rank ", m.rank(), ")");
  if (status.state() == v1::CLUSTER_STATE_TRANSITIONING) {
    absl::StrAppend(&out, "; epoch ", status.pending_epoch(),
                    " is moving its state");
  } else {
    absl::StrAppend(&out, "; waiting for the next step boundary");
  }
  return out;
}

struct WaitResult {
  int exit = 0;
  std::string final_state;
  int64_t waited_ms = 0;
};

// Polls the member until it is LEFT (or gone), DEAD, or `timeout_s` pass.
WaitResult WaitForLeave(net::LeaderFollower& coordinators,
                        const OnlineArgs& args, const std::string& name,
                        int64_t timeout_s) {
  Progress progress("drain", DefaultProgressOptions());
  Clock* clock = RealClock::Get();
  const int64_t start = clock->NowMs();
  WaitResult r;
  while (true) {
    v1::GetClusterStatusResponse status;
    grpc::Status s = CallLeader<v1::DashboardService>(
        coordinators, args,
        [&](v1::DashboardService::Stub& stub, grpc::ClientContext* context) {
          return stub.GetClusterStatus(context, v1::GetClusterStatusRequest(),
                                       &status);
        });
    r.waited_ms = clock->NowMs() - start;
    if (!s.ok()) {
      progress.Done();
      r.exit = ReportRpcError("drain", args, s);
      return r;
    }
    const v1::MemberStatus* m = FindMember(status, name);
    if (m == nullptr || m->state() == v1::MEMBER_STATE_LEFT) {
      r.final_state = "LEFT";
      return r;
    }
    if (m->state() == v1::MEMBER_STATE_DEAD) {
      progress.Done();
      std::fprintf(stderr,
                   "zshardctl drain: worker %s died before it had left "
                   "(its state is recovered like any failure's)\n",
                   name.c_str());
      r.exit = 1;
      return r;
    }
    if (r.waited_ms >= timeout_s * 1000) {
      progress.Done();
      std::fprintf(stderr, "zshardctl drain: worker %s is still %s after %ds\n",
                   name.c_str(), MemberStateName(m->state()),
                   static_cast<int>(timeout_s));
      r.exit = 1;
      return r;
    }
    progress.Update(Waiting(status, *m));
    std::this_thread::sleep_for(std::chrono::milliseconds(kPollMs));
  }
}

}  // namespace

int RunDrainCommand(const GlobalFlags& global, int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "--help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (argc < 2 || std::string(argv[1]).rfind("--", 0) == 0) {
    return ReportError(
        "drain", absl::InvalidArgumentError(
                     "the worker's NAME is missing (zshardctl drain NAME)"));
  }
  const std::string name = argv[1];
  absl::StatusOr<OnlineArgs> args =
      ParseOnlineArgs(global, argc - 1, argv + 1,
                      {FlagOf(FLAGS_wait), FlagOf(FLAGS_wait_timeout_s),
                       FlagOf(FLAGS_token_file)});
  if (!args.ok()) return ReportError("drain", args.status());
  if (args->parsed.help()) return PrintUsage(kUsage, *args);
  if (absl::Status s = CheckRange(FLAGS_wait_timeout_s, 1, 86400); !s.ok()) {
    return ReportError("drain", s);
  }
  std::string token;
  const std::string token_file = args->parsed.Given(FLAGS_token_file)
                                     ? absl::GetFlag(FLAGS_token_file)
                                     : global.token_file;
  if (!token_file.empty()) {
    absl::StatusOr<std::string> read = ReadTokenFile(token_file);
    if (!read.ok()) return ReportError("drain", read.status());
    token = *std::move(read);
  }
  auto coordinators = Connect(*args);
  if (!coordinators.ok()) return ReportError("drain", coordinators.status());

  v1::DrainWorkerRequest req;
  req.set_name(name);
  v1::DrainWorkerResponse resp;
  grpc::Status s = CallLeader<v1::AdminService>(
      **coordinators, *args,
      [&](v1::AdminService::Stub& stub, grpc::ClientContext* context) {
        return stub.DrainWorker(context, req, &resp);
      },
      token);
  if (s.error_code() == grpc::StatusCode::NOT_FOUND) {
    // A name that is not a live member is bad input.
    std::fprintf(stderr, "zshardctl drain: %s\n", s.error_message().c_str());
    return 2;
  }
  if (!s.ok()) return ReportRpcError("drain", *args, s);

  WaitResult waited{0, "DRAINING", 0};
  const bool wait = absl::GetFlag(FLAGS_wait);
  if (wait) {
    waited = WaitForLeave(**coordinators, *args, name,
                          absl::GetFlag(FLAGS_wait_timeout_s));
    if (waited.exit != 0) return waited.exit;
  }
  if (args->json) {
    nlohmann::json out = {{"worker", name}, {"state", waited.final_state}};
    if (wait) out["waited_ms"] = waited.waited_ms;
    std::cout << out.dump() << std::endl;
  } else if (waited.final_state == "LEFT") {
    std::cout << "worker " << name << " handed its state over and left after "
              << waited.waited_ms << " ms\n";
  } else {
    std::cout << "worker " << name
              << " is draining: it hands its state over at the next step "
                 "boundary, then exits\n";
  }
  return 0;
}

}  // namespace zshard::ctl
