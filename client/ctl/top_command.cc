// zshardctl --coordinator ADDR top [--once] [--interval-ms N]: a live,
// refreshing per-rank view of a running job (state, step, step time split
// into phases, bytes/s, memory, loss), coloured when stdout is a terminal.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
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
#include "client/ctl/table.h"
#include "zshard/v1/dashboard_service.grpc.pb.h"

ABSL_FLAG(bool, once, false, "print one frame and exit");
ABSL_FLAG(int64_t, interval_ms, 1000, "time between frames, milliseconds");

namespace zshard::ctl {
namespace {

constexpr char kUsage[] =
    "usage: zshardctl --coordinator HOST:PORT top [--once] [--interval-ms N]\n"
    "         [--tls-ca F] [--tls-cert F --tls-key F] [--timeout-ms N]\n";

// Phase columns shown at most.
constexpr int kMaxPhases = 5;

// ANSI colour of a state: green active, red gone, yellow otherwise.
const char* StateColour(v1::MemberState s) {
  switch (s) {
    case v1::MEMBER_STATE_ACTIVE:
      return "\033[32m";
    case v1::MEMBER_STATE_DEAD:
    case v1::MEMBER_STATE_LEFT:
      return "\033[31m";
    default:
      return "\033[33m";
  }
}

std::string Ms(double ms) { return absl::StrFormat("%.1f", ms); }

}  // namespace

std::string RenderTopFrame(const v1::GetClusterStatusResponse& status,
                           const v1::GetTelemetryResponse& telemetry,
                           bool colour) {
  std::string out = absl::StrFormat(
      "job %s  epoch %d  %s  world %d  instances %d  ", status.job(),
      status.epoch(),
      status.state() == v1::CLUSTER_STATE_TRANSITIONING ? "TRANSITIONING"
                                                        : "STABLE",
      status.world(), status.instances());
  if (telemetry.ranks_size() == 0) {
    out += "no telemetry yet\n";
  } else {
    absl::StrAppendFormat(
        &out, "steps %d..%d  step %s ms (slowest %s)  %s/s\n",
        telemetry.min_step(), telemetry.max_step(),
        Ms(telemetry.mean_step_ms()), Ms(telemetry.max_step_ms()),
        HumanBytes(static_cast<int64_t>(telemetry.bytes_per_s())));
  }
  std::vector<std::string> phases;
  for (const v1::PhaseTime& t : telemetry.mean_phases()) {
    // "step" is the whole step, shown as STEP_MS.
    if (t.phase() != "step" && static_cast<int>(phases.size()) < kMaxPhases) {
      phases.push_back(t.phase());
    }
  }
  std::map<std::string, const v1::RankTelemetry*> by_worker;
  for (const v1::RankTelemetry& r : telemetry.ranks()) {
    by_worker[r.worker_id()] = &r;
  }
  std::vector<std::string> header = {"NAME", "RANK", "STATE", "STEP",
                                     "STEP_MS"};
  for (const std::string& p : phases) header.push_back(p);
  for (const char* h : {"BYTES/S", "MEMORY", "LOSS", "GRAD_NORM"}) {
    header.push_back(h);
  }
  Table table(header);
  std::vector<v1::MemberState> states;
  for (const v1::MemberStatus& m : status.members()) {
    std::vector<std::string> row = {
        m.name(), m.rank() < 0 ? "-" : absl::StrCat(m.rank()),
        MemberStateName(m.state()), absl::StrCat(m.step())};
    auto it = by_worker.find(m.worker_id());
    if (it == by_worker.end()) {
      row.resize(header.size(), "-");
    } else {
      const v1::RankTelemetry& r = *it->second;
      row.push_back(Ms(r.latest().step_ms()));
      for (const std::string& p : phases) {
        std::string cell = "-";
        for (const v1::PhaseTime& t : r.latest().phases()) {
          if (t.phase() == p) cell = Ms(t.ms());
        }
        row.push_back(cell);
      }
      int64_t memory = 0;
      for (const auto& [k, v] : r.memory_bytes()) memory += v;
      row.push_back(HumanBytes(static_cast<int64_t>(r.bytes_per_s())));
      row.push_back(HumanBytes(memory));
      row.push_back(absl::StrFormat("%.4g", r.latest().loss()));
      row.push_back(absl::StrFormat("%.4g", r.latest().grad_norm()));
    }
    table.AddRow(std::move(row));
    states.push_back(m.state());
  }
  std::string rendered = table.Render();
  if (!colour) return out + rendered;
  // Colour each member's line (after the header line) by its state.
  size_t pos = rendered.find('\n') + 1;
  out += rendered.substr(0, pos);
  for (v1::MemberState s : states) {
    size_t end = rendered.find('\n', pos);
    absl::StrAppend(&out, StateColour(s), rendered.substr(pos, end - pos),
                    "\033[0m\n");
    pos = end + 1;
  }
  return out;
}

int RunTopCommand(const GlobalFlags& global, int argc, char** argv) {
  absl::StatusOr<OnlineArgs> args = ParseOnlineArgs(
      global, argc, argv, {FlagOf(FLAGS_once), FlagOf(FLAGS_interval_ms)});
  if (!args.ok()) return ReportError("top", args.status());
  if (args->parsed.help()) return PrintUsage(kUsage, *args);
  if (absl::Status s = CheckRange(FLAGS_interval_ms, 100, 3600000); !s.ok()) {
    return ReportError("top", s);
  }
  const int64_t interval = absl::GetFlag(FLAGS_interval_ms);
  auto coordinators = Connect(*args);
  if (!coordinators.ok()) return ReportError("top", coordinators.status());
  const bool tty = isatty(STDOUT_FILENO) == 1;
  const bool once = absl::GetFlag(FLAGS_once);
  while (true) {
    v1::GetClusterStatusResponse status;
    grpc::Status s = CallLeader<v1::DashboardService>(
        **coordinators, *args,
        [&](v1::DashboardService::Stub& stub, grpc::ClientContext* context) {
          return stub.GetClusterStatus(context, v1::GetClusterStatusRequest(),
                                       &status);
        });
    v1::GetTelemetryResponse telemetry;
    if (s.ok()) {
      s = CallLeader<v1::DashboardService>(
          **coordinators, *args,
          [&](v1::DashboardService::Stub& stub, grpc::ClientContext* context) {
            return stub.GetTelemetry(context, v1::GetTelemetryRequest(),
                                     &telemetry);
          });
    }
    if (!s.ok()) return ReportRpcError("top", *args, s);
    std::string frame = RenderTopFrame(status, telemetry, tty);
    // A terminal gets the frame in place of the last one.
    if (tty && !once) std::cout << "\033[H\033[2J";
    std::cout << frame << std::flush;
    if (once) return 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(interval));
  }
}

}  // namespace zshard::ctl
