// zshardctl's online commands against an in-process coordinator: the
// events and ledger JSON contracts, plan queries, explain, events --follow,
// and the exit statuses for an unreachable coordinator and bad usage.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "common/plan/ledger.h"
#include "nlohmann/json.hpp"
#include "tests/server/coordinator_fixture.h"
#include "tests/server/parallel_fixture.h"

namespace zshard::server::testing {
namespace {

struct CtlResult {
  int exit = -1;
  std::string out;
  std::string err;
};

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Ctl() {
  const char* dir = std::getenv("ZSHARD_BIN_DIR");
  return std::string(dir == nullptr ? "build/bin" : dir) + "/zshardctl";
}

CtlResult RunCtl(const std::string& args) {
  std::string base = ::testing::TempDir() + "/ctl_" + std::to_string(getpid());
  std::string cmd =
      Ctl() + " " + args + " >" + base + ".out 2>" + base + ".err </dev/null";
  int status = std::system(cmd.c_str());
  CtlResult r;
  r.exit = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = Slurp(base + ".out");
  r.err = Slurp(base + ".err");
  return r;
}

class CtlOnlineTest : public CoordinatorFixture {
 protected:
  void SetUp() override {
    CoordinatorFixture::SetUp();
    w_ = {Join("w0"), Join("w1")};
    epoch_ = coordinator_->membership()->View().pending_epoch;
    for (const auto& w : w_) Ack(w, epoch_, v1::ACK_PHASE_PREPARED);
    for (const auto& w : w_) Ack(w, epoch_, v1::ACK_PHASE_ACTIVE);
    w_.push_back(Join("w2"));
    addr_ = "--coordinator " + coordinator_->address();
  }

  void Report(int i, const std::map<std::string, int64_t>& memory) {
    v1::StreamTelemetryResponse resp;
    auto ctx = Ctx();
    auto writer = worker_->StreamTelemetry(ctx.get(), &resp);
    v1::TelemetryReport r;
    r.set_worker_id(w_[i].worker_id());
    r.set_token(w_[i].token());
    r.set_epoch(epoch_);
    r.set_step(3);
    for (const auto& [k, v] : memory) (*r.mutable_memory_bytes())[k] = v;
    ASSERT_TRUE(writer->Write(r));
    writer->WritesDone();
    ASSERT_TRUE(writer->Finish().ok());
  }

  std::map<std::string, int64_t> Predicted(int rank) {
    const job::JobSpec& spec = coordinator_->membership()->spec();
    plan::Plan p =
        plan::MakePlan(spec.model, job::JobPlanOptions(spec, 2)).value();
    plan::StageBytes b =
        plan::RankStageBytes(spec.model, p, rank, plan::Stage::kZero1);
    return {{"param", b.param_bytes},
            {"grad", b.grad_bytes},
            {"master", b.master_bytes},
            {"exp_avg", b.exp_avg_bytes},
            {"exp_avg_sq", b.exp_avg_sq_bytes}};
  }

  std::vector<v1::JoinResponse> w_;
  int64_t epoch_ = 0;
  std::string addr_;
};

TEST_F(CtlOnlineTest, EventsJsonIsAnArrayOldestFirst) {
  CtlResult r = RunCtl(addr_ + " events --output json");
  ASSERT_EQ(r.exit, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_array()) << r.out;
  ASSERT_EQ(j.size(), 8u) << r.out;
  EXPECT_EQ(j[1]["kind"], "join");
  EXPECT_EQ(j[4]["kind"], "propose");
  EXPECT_EQ(j[5]["kind"], "commit");
  EXPECT_EQ(j[4]["epoch"], 0);  // the committed epoch when it happened
  EXPECT_EQ(j[5]["epoch"], epoch_);
  std::string time = j[0]["time"];
  EXPECT_EQ(time.size(), 24u) << time;  // 2026-11-29T11:40:00.123Z
  EXPECT_EQ(time[10], 'T');
  EXPECT_EQ(time.back(), 'Z');
  EXPECT_NE(j[4]["reason"].get<std::string>().find("largest multiple"),
            std::string::npos);
  CtlResult table = RunCtl(addr_ + " events");
  ASSERT_EQ(table.exit, 0) << table.err;
  EXPECT_NE(table.out.find("KIND"), std::string::npos);
  EXPECT_NE(table.out.find("member w2 joined"), std::string::npos);
}

TEST_F(CtlOnlineTest, LedgerJsonComparesPredictedAndMeasured) {
  Report(0, Predicted(0));
  std::map<std::string, int64_t> off = Predicted(1);
  off["exp_avg"] -= 128;
  Report(1, off);
  CtlResult r = RunCtl(addr_ + " ledger --output json");
  ASSERT_EQ(r.exit, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out;
  EXPECT_EQ(j["stage"], "zero1");
  EXPECT_EQ(j["world"], 2);
  EXPECT_EQ(j["instances"], 2);
  ASSERT_EQ(j["ranks"].size(), 2u);
  const nlohmann::json& r0 = j["ranks"][0];
  EXPECT_EQ(r0["rank"], 0);
  EXPECT_EQ(r0["worker"], "w0");
  EXPECT_EQ(r0["predicted_bytes"], r0["measured_bytes"]);
  for (const char* c : {"param", "grad", "master", "exp_avg", "exp_avg_sq"}) {
    EXPECT_EQ(r0["categories"][c]["predicted"], Predicted(0)[c]) << c;
    EXPECT_EQ(r0["categories"][c]["measured"], Predicted(0)[c]) << c;
  }
  const nlohmann::json& r1 = j["ranks"][1];
  EXPECT_EQ(r1["predicted_bytes"].get<int64_t>() -
                r1["measured_bytes"].get<int64_t>(),
            128);
  CtlResult table = RunCtl(addr_ + " ledger");
  ASSERT_EQ(table.exit, 0) << table.err;
  EXPECT_NE(table.out.find("DIFFERS"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("1 rank(s) hold other bytes"), std::string::npos);
}

TEST_F(CtlOnlineTest, PlanParamQueryAndExplain) {
  CtlResult r = RunCtl(addr_ + " plan --param a --end 100 --output json");
  ASSERT_EQ(r.exit, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out;
  int64_t covered = 0;
  for (const auto& p : j["pieces"]) {
    EXPECT_EQ(p["param"], "a");
    covered += p["end"].get<int64_t>() - p["begin"].get<int64_t>();
  }
  EXPECT_EQ(covered, 200);  // elements 0..100, once per instance
  CtlResult missing = RunCtl(addr_ + " plan --param nope");
  EXPECT_EQ(missing.exit, 1);
  EXPECT_NE(missing.err.find("param 'nope' is not in the model"),
            std::string::npos)
      << missing.err;
  CtlResult e = RunCtl(addr_ + " explain");
  ASSERT_EQ(e.exit, 0) << e.err;
  EXPECT_NE(e.out.find("1 spare(s): w2"), std::string::npos) << e.out;
}

TEST_F(CtlOnlineTest, TopShowsEveryMemberAndColoursATerminal) {
  Report(0, Predicted(0));
  CtlResult r = RunCtl(addr_ + " top --once");
  ASSERT_EQ(r.exit, 0) << r.err;
  for (const char* name : {"w0", "w1", "w2"}) {
    EXPECT_NE(r.out.find(name), std::string::npos) << r.out;
  }
  EXPECT_NE(r.out.find("SPARE"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\033["), std::string::npos);  // not a terminal
  // Under a pseudo-terminal (script(1)) the rows are coloured.
  std::string cmd =
      "script -qec '" + Ctl() + " " + addr_ + " top --once' /dev/null";
  FILE* pipe = popen(cmd.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), pipe)) out.append(buf, n);
  EXPECT_EQ(pclose(pipe), 0) << out;
  EXPECT_NE(out.find("\033[32m"), std::string::npos) << out;  // ACTIVE
  EXPECT_NE(out.find("\033[33m"), std::string::npos) << out;  // SPARE
}

TEST_F(CtlOnlineTest, UnreachableAndBadUsageExitCodes) {
  CtlResult r = RunCtl(
      "--coordinator 127.0.0.1:1 events --timeout-ms 2000 --output json");
  EXPECT_EQ(r.exit, 3);
  EXPECT_EQ(r.err,
            "zshardctl events: coordinator 127.0.0.1:1 is unreachable\n");
  EXPECT_TRUE(r.out.empty());
  EXPECT_EQ(RunCtl(addr_ + " events --bogus").exit, 2);
  EXPECT_EQ(RunCtl(addr_ + " ledger --output yaml").exit, 2);
  EXPECT_EQ(RunCtl("explain").exit, 2);  // no --coordinator
}

TEST_F(CtlOnlineTest, EventsFollowShowsADrainAndTheReplan) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    std::string ctl = Ctl();
    std::string addr = coordinator_->address();
    execl(ctl.c_str(), ctl.c_str(), "--coordinator", addr.c_str(), "events",
          "--follow", "--output", "json", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  std::string out;
  auto wait_for = [&](const std::string& needle) {
    absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (out.find(needle) == std::string::npos && absl::Now() < deadline) {
      pollfd p{fds[0], POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      char buf[4096];
      ssize_t n = read(fds[0], buf, sizeof(buf));
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    return out.find(needle) != std::string::npos;
  };
  EXPECT_TRUE(wait_for("\"kind\":\"stable\"")) << out;
  v1::DrainWorkerRequest drain;
  drain.set_name("w1");
  v1::DrainWorkerResponse dresp;
  ASSERT_TRUE(admin_->DrainWorker(Ctx().get(), drain, &dresp).ok());
  EXPECT_TRUE(wait_for("member w2 took")) << out;
  kill(pid, SIGTERM);
  waitpid(pid, nullptr, 0);
  close(fds[0]);
  // One JSON object per line.
  std::istringstream lines(out);
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    EXPECT_TRUE(j.is_object()) << line;
    ++n;
  }
  EXPECT_GE(n, 8);
}

// A model-parallel job: plan shows every slot's plan (the slot named), and
// one slot's pieces with --tp and --pp; the ledger names each rank's slot.
class CtlParallelTest : public ParallelCoordinatorFixture {
 protected:
  std::string Addr() { return "--coordinator " + coordinator_->address(); }
};

TEST_F(CtlParallelTest, PlanAndLedgerArePerSlot) {
  CtlResult all = RunCtl(Addr() + " plan --output json");
  ASSERT_EQ(all.exit, 0) << all.err;
  nlohmann::json j = nlohmann::json::parse(all.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << all.out;
  ASSERT_EQ(j["slots"].size(), 4u) << all.out;
  for (const nlohmann::json& slot : j["slots"]) {
    EXPECT_EQ(slot["ranks"].size(), 2u) << slot.dump();
    EXPECT_EQ(slot["world"], 2) << slot.dump();
  }
  CtlResult table = RunCtl(Addr() + " plan");
  ASSERT_EQ(table.exit, 0) << table.err;
  for (const char* name : {"slot tp 0 pp 0", "slot tp 1 pp 0", "slot tp 0 pp 1",
                           "slot tp 1 pp 1"}) {
    EXPECT_NE(table.out.find(name), std::string::npos) << table.out;
  }
  // The pieces of slot (tp 1, pp 0): its two data-parallel ranks, held by
  // the members the slot summary names.
  const nlohmann::json& summary = j["slots"][1];
  ASSERT_EQ(summary["slot"], nlohmann::json({{"tp", 1}, {"pp", 0}}));
  std::set<std::string> members;
  for (const nlohmann::json& r : summary["ranks"]) members.insert(r["worker"]);
  CtlResult one =
      RunCtl(Addr() + " plan --tp 1 --pp 0 --bucket 0 --output json");
  ASSERT_EQ(one.exit, 0) << one.err;
  nlohmann::json p = nlohmann::json::parse(one.out, nullptr, false);
  ASSERT_TRUE(p.is_object()) << one.out;
  EXPECT_EQ(p["slot"], nlohmann::json({{"tp", 1}, {"pp", 0}}));
  ASSERT_FALSE(p["pieces"].empty()) << one.out;
  for (const nlohmann::json& piece : p["pieces"]) {
    EXPECT_EQ(members.count(piece["worker"]), 1u) << piece.dump();
    EXPECT_LT(piece["rank"].get<int>(), 2) << piece.dump();
  }
  CtlResult half = RunCtl(Addr() + " plan --tp 1");
  EXPECT_EQ(half.exit, 2);
  EXPECT_NE(half.err.find("flags --tp and --pp go together"), std::string::npos)
      << half.err;
  CtlResult ledger = RunCtl(Addr() + " ledger --output json");
  ASSERT_EQ(ledger.exit, 0) << ledger.err;
  nlohmann::json l = nlohmann::json::parse(ledger.out, nullptr, false);
  ASSERT_EQ(l["ranks"].size(), 8u) << ledger.out;
  for (const nlohmann::json& r : l["ranks"]) {
    EXPECT_TRUE(r.contains("slot")) << r.dump();
    EXPECT_GT(r["predicted_bytes"].get<int64_t>(), 0) << r.dump();
  }
}

}  // namespace
}  // namespace zshard::server::testing
