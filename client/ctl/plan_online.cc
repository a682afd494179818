// zshardctl --coordinator ADDR plan [--tp T --pp P] [--rank R] [--param
// NAME [--begin A] [--end B]] [--bucket K [--buffer F]] [--moves] [--output
// table|json]: the committed plan of a running job: per-rank summaries, or
// the pieces that answer "who owns NAME elements A..B?", and the moves into
// the epoch. A model-parallel job's plan is one per slot: every slot's
// summary, or with --tp and --pp that slot's plan as above.
#include <cstdio>
#include <iostream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "client/ctl/commands.h"
#include "client/ctl/model_options.h"
#include "client/ctl/online.h"
#include "client/ctl/online_commands.h"
#include "client/ctl/progress.h"
#include "client/ctl/shared_flags.h"
#include "client/ctl/table.h"
#include "nlohmann/json.hpp"
#include "zshard/v1/dashboard_service.grpc.pb.h"

ABSL_FLAG(std::string, param, "", "the param whose owners are shown");
ABSL_FLAG(int64_t, begin, 0, "first element of --param");
ABSL_FLAG(int64_t, end, 0, "end of --param's elements (default: all)");
ABSL_FLAG(int64_t, bucket, -1,
          "the bucket whose owners are shown (default: none)");
ABSL_FLAG(int64_t, buffer, 0, "the buffer of --bucket");
ABSL_FLAG(bool, moves, false,
          "list the moves that brought the committed epoch from its base");
ABSL_FLAG(int64_t, tp, -1,
          "a model-parallel job's slot (with --pp): its plan, pieces and "
          "moves (default: every slot's summary)");
ABSL_FLAG(int64_t, pp, -1, "the pipeline rank of --tp's slot");

namespace zshard::ctl {
namespace {

constexpr char kUsage[] =
    "usage: zshardctl --coordinator HOST:PORT plan [--tp T --pp P] [--rank R]\n"
    "         [--param NAME [--begin A] [--end B]] [--bucket K [--buffer F]]\n"
    "         [--moves] [--output table|json] [--tls-ca F] [--tls-cert F "
    "--tls-key F]\n";

// Pages fetched at most (10,000 pieces each).
constexpr int kMaxPages = 100;

// "slot tp T pp P"
std::string SlotName(const v1::ParallelSlot& slot) {
  return absl::StrCat("slot tp ", slot.tp(), " pp ", slot.pp());
}

nlohmann::json PlanJson(const v1::GetPlanResponse& p) {
  nlohmann::json out = {{"epoch", p.epoch()},
                        {"world", p.world()},
                        {"instances", p.instances()},
                        {"shard_group_size", p.shard_group_size()},
                        {"bucket_size", p.bucket_size()},
                        {"plan_hash", p.plan_hash()},
                        {"ranks", nlohmann::json::array()},
                        {"pieces", nlohmann::json::array()}};
  for (const v1::RankSummary& r : p.ranks()) {
    out["ranks"].push_back({{"rank", r.rank()},
                            {"instance", r.instance()},
                            {"shard_rank", r.shard_rank()},
                            {"worker", r.name()},
                            {"owned_elements", r.owned_elements()},
                            {"pieces", r.pieces()}});
  }
  if (p.has_slot()) {
    out["slot"] = {{"tp", p.slot().tp()}, {"pp", p.slot().pp()}};
  }
  if (p.slots_size() > 0) {
    // A model-parallel job: one plan per slot; ranks are data-parallel
    // ranks of the slot, workers the members at it.
    out["slots"] = nlohmann::json::array();
    for (const v1::SlotPlan& s : p.slots()) {
      out["slots"].push_back(PlanJson(s.plan()));
    }
  }
  for (const v1::PlanPiece& x : p.pieces()) {
    out["pieces"].push_back({{"param", x.param()},
                             {"begin", x.param_begin()},
                             {"end", x.param_end()},
                             {"rank", x.rank()},
                             {"instance", x.instance()},
                             {"worker", x.worker()},
                             {"buffer", x.buffer()},
                             {"bucket", x.bucket()},
                             {"offset_in_bucket", x.offset_in_bucket()}});
  }
  if (p.moves_size() > 0 || p.total_moves() > 0) {
    out["base_epoch"] = p.base_epoch();
    out["total_moves"] = p.total_moves();
    out["moves"] = nlohmann::json::array();
    for (const v1::PlanMove& pm : p.moves()) {
      const v1::Move& m = pm.move();
      out["moves"].push_back({{"param", pm.param()},
                              {"begin", m.begin()},
                              {"end", m.end()},
                              {"from_rank", m.from_rank()},
                              {"from_worker", pm.from_worker()},
                              {"from_buffer", pm.from_buffer()},
                              {"from_bucket", pm.from_bucket()},
                              {"from_offset", pm.from_offset()},
                              {"to_rank", m.to_rank()},
                              {"to_worker", pm.to_worker()},
                              {"buffer", m.buffer()},
                              {"bucket", m.bucket()},
                              {"offset", m.offset()},
                              {"length", m.length()}});
    }
  }
  return out;
}

std::string PlanTable(const v1::GetPlanResponse& p) {
  if (p.slots_size() > 0) {
    std::string out = absl::StrCat(
        "epoch ", p.epoch(), "  world ", p.world(), "  instances ",
        p.instances(), "  plan ", p.plan_hash(), "\n",
        "model-parallel: one plan per slot (--tp T --pp P for its pieces and "
        "moves); ranks are the slot's data-parallel ranks\n");
    for (const v1::SlotPlan& s : p.slots()) {
      absl::StrAppend(&out, "\n", PlanTable(s.plan()));
    }
    return out;
  }
  std::string out = absl::StrCat(
      p.has_slot() ? SlotName(p.slot()) + "  " : std::string(), "epoch ",
      p.epoch(), "  world ", p.world(), "  instances ", p.instances(), "  D ",
      p.shard_group_size(), "  plan ", p.plan_hash(), "\n");
  if (p.ranks_size() > 0) {
    Table t({"RANK", "INSTANCE", "SHARD_RANK", "WORKER", "OWNED", "PIECES"});
    for (const v1::RankSummary& r : p.ranks()) {
      t.AddRow({absl::StrCat(r.rank()), absl::StrCat(r.instance()),
                absl::StrCat(r.shard_rank()), r.name(),
                Grouped(r.owned_elements()), absl::StrCat(r.pieces())});
    }
    out += t.Render();
  }
  if (p.pieces_size() > 0) {
    Table t({"PARAM", "ELEMENTS", "RANK", "INSTANCE", "WORKER", "BUFFER",
             "BUCKET", "OFFSET"});
    for (const v1::PlanPiece& x : p.pieces()) {
      t.AddRow({x.param(),
                absl::StrCat("[", x.param_begin(), ", ", x.param_end(), ")"),
                absl::StrCat(x.rank()), absl::StrCat(x.instance()), x.worker(),
                absl::StrCat(x.buffer()), absl::StrCat(x.bucket()),
                absl::StrCat(x.offset_in_bucket())});
    }
    out += t.Render();
  }
  if (p.moves_size() > 0 || p.total_moves() > 0) {
    absl::StrAppend(&out, "moves into epoch ", p.epoch(), " from epoch ",
                    p.base_epoch(), ": ", p.total_moves(), "\n");
    Table t({"PARAM", "ELEMENTS", "FROM", "TO", "BUFFER", "BUCKET", "OFFSET"});
    for (const v1::PlanMove& pm : p.moves()) {
      const v1::Move& m = pm.move();
      t.AddRow({pm.param(), absl::StrCat("[", m.begin(), ", ", m.end(), ")"),
                m.from_rank() < 0 ? std::string("checkpoint")
                                  : absl::StrCat("rank ", m.from_rank(), " ",
                                                 pm.from_worker()),
                absl::StrCat("rank ", m.to_rank(), " ", pm.to_worker()),
                absl::StrCat(m.buffer()), absl::StrCat(m.bucket()),
                absl::StrCat(m.offset())});
    }
    out += t.Render();
  }
  return out;
}

}  // namespace

int RunPlanAnyCommand(const GlobalFlags& global, int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--model", 0) == 0 || arg.rfind("--preset", 0) == 0 ||
        arg.rfind("--job", 0) == 0) {
      return RunPlanCommand(global, argc, argv);
    }
  }
  if (global.coordinator.empty()) return RunPlanCommand(global, argc, argv);
  absl::StatusOr<OnlineArgs> args = ParseOnlineArgs(
      global, argc, argv,
      {FlagOf(FLAGS_rank), FlagOf(FLAGS_param), FlagOf(FLAGS_begin),
       FlagOf(FLAGS_end), FlagOf(FLAGS_bucket), FlagOf(FLAGS_buffer),
       FlagOf(FLAGS_moves), FlagOf(FLAGS_tp), FlagOf(FLAGS_pp)});
  if (!args.ok()) return ReportError("plan", args.status());
  if (args->parsed.help()) return PrintUsage(kUsage, *args);
  v1::GetPlanRequest req;
  const ParsedCommandLine& f = args->parsed;
  constexpr int64_t kMax = int64_t{1} << 62;
  // Absent flags keep their defaults unchecked, as the request means them.
  struct Range {
    const absl::Flag<int64_t>* flag;
    int64_t min, max;
  };
  for (const Range& r :
       {Range{&FLAGS_rank, 0, 1 << 30}, Range{&FLAGS_begin, 0, kMax},
        Range{&FLAGS_end, 1, kMax}, Range{&FLAGS_bucket, 0, 1 << 30},
        Range{&FLAGS_buffer, 0, 1 << 30}, Range{&FLAGS_tp, 0, 1 << 20},
        Range{&FLAGS_pp, 0, 1 << 20}}) {
    if (!f.Given(*r.flag)) continue;
    if (absl::Status s = CheckRange(*r.flag, r.min, r.max); !s.ok()) {
      return ReportError("plan", s);
    }
  }
  if (f.Given(FLAGS_tp) != f.Given(FLAGS_pp)) {
    return ReportError(
        "plan", absl::InvalidArgumentError("flags --tp and --pp go together"));
  }
  if (f.Given(FLAGS_tp)) {
    req.mutable_slot()->set_tp(static_cast<int32_t>(absl::GetFlag(FLAGS_tp)));
    req.mutable_slot()->set_pp(static_cast<int32_t>(absl::GetFlag(FLAGS_pp)));
  }
  if (f.Given(FLAGS_rank)) {
    req.set_rank(static_cast<int32_t>(absl::GetFlag(FLAGS_rank)));
  }
  req.set_param(absl::GetFlag(FLAGS_param));
  req.set_param_begin(absl::GetFlag(FLAGS_begin));
  req.set_param_end(absl::GetFlag(FLAGS_end));
  if (f.Given(FLAGS_bucket)) {
    req.set_bucket(static_cast<int32_t>(absl::GetFlag(FLAGS_bucket)));
  }
  req.set_buffer(static_cast<int32_t>(absl::GetFlag(FLAGS_buffer)));
  req.set_page_size(10000);
  req.set_moves(absl::GetFlag(FLAGS_moves));

  auto coordinators = Connect(*args);
  if (!coordinators.ok()) return ReportError("plan", coordinators.status());
  v1::GetPlanResponse all;
  // Large plans come in many pages: show how far it got after a second.
  Progress progress("plan", DefaultProgressOptions());
  for (int page = 0; page < kMaxPages; ++page) {
    v1::GetPlanResponse resp;
    grpc::Status s = CallLeader<v1::DashboardService>(
        **coordinators, *args,
        [&](v1::DashboardService::Stub& stub, grpc::ClientContext* context) {
          return stub.GetPlan(context, req, &resp);
        });
    if (!s.ok()) return ReportRpcError("plan", *args, s);
    if (page == 0) {
      all = resp;
    } else {
      all.mutable_pieces()->MergeFrom(resp.pieces());
    }
    if (resp.next_page_token().empty()) break;
    req.set_page_token(resp.next_page_token());
    progress.Update(absl::StrCat("fetched ", all.pieces_size(), " pieces in ",
                                 page + 1, " page(s)"));
  }
  progress.Done();
  if (args->json) {
    std::cout << PlanJson(all).dump() << std::endl;
  } else {
    std::cout << PlanTable(all);
  }
  return 0;
}

}  // namespace zshard::ctl
