// DashboardService over the wire: events (list and follow), telemetry,
// the measured ledger, explain, and the per-rank metrics checked with
// Prometheus's own text parser.
#include <httplib.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "common/plan/ledger.h"
#include "tests/server/coordinator_fixture.h"

namespace zshard::server::testing {
namespace {

class DashboardTest : public CoordinatorFixture {
 protected:
  void SetUp() override {
    CoordinatorOptions options;
    options.http_listen = "127.0.0.1:0";
    StartCoordinator(options);
  }

  // w0 and w1 ranked in a stable epoch; w2 a spare. Returns the epoch.
  int64_t StableWorldOfTwo() {
    w_ = {Join("w0"), Join("w1")};
    int64_t epoch = coordinator_->membership()->View().pending_epoch;
    EXPECT_GT(epoch, 0);
    for (const auto& w : w_) {
      EXPECT_TRUE(Ack(w, epoch, v1::ACK_PHASE_PREPARED).ok());
    }
    for (const auto& w : w_) {
      EXPECT_TRUE(Ack(w, epoch, v1::ACK_PHASE_ACTIVE).ok());
    }
    w_.push_back(Join("w2"));
    return epoch;
  }

  // Streams one report per entry of `memory` (one per worker of w_).
  void Report(int64_t epoch, int64_t step,
              const std::vector<std::map<std::string, int64_t>>& memory) {
    for (size_t i = 0; i < memory.size(); ++i) {
      v1::StreamTelemetryResponse resp;
      auto ctx = Ctx();
      auto writer = worker_->StreamTelemetry(ctx.get(), &resp);
      v1::TelemetryReport r;
      r.set_worker_id(w_[i].worker_id());
      r.set_token(w_[i].token());
      r.set_epoch(epoch);
      r.set_step(step);
      for (auto [phase, ms] :
           {std::pair<const char*, double>{"reduce_scatter", 20.0 + i},
            {"adam", 5.0},
            {"all_gather", 10.0}}) {
        v1::PhaseTime* t = r.add_phase_times();
        t->set_phase(phase);
        t->set_ms(ms);
      }
      r.set_bytes_sent(1 << 20);
      r.set_loss(0.5 + static_cast<double>(i));
      r.set_grad_norm(2.0);
      for (const auto& [k, v] : memory[i]) (*r.mutable_memory_bytes())[k] = v;
      ASSERT_TRUE(writer->Write(r));
      ASSERT_TRUE(writer->WritesDone());
      grpc::Status s = writer->Finish();
      ASSERT_TRUE(s.ok()) << s.error_message();
    }
  }

  // The ZeRO-1 prediction for `rank` of the test job at world 2.
  std::map<std::string, int64_t> Predicted(int rank) {
    const job::JobSpec& spec = coordinator_->membership()->spec();
    plan::Plan p =
        plan::MakePlan(spec.model, job::JobPlanOptions(spec, 2)).value();
    plan::StageBytes b =
        plan::RankStageBytes(spec.model, p, rank, plan::Stage::kZero1);
    return {{"param", b.param_bytes},           {"grad", b.grad_bytes},
            {"master", b.master_bytes},         {"exp_avg", b.exp_avg_bytes},
            {"exp_avg_sq", b.exp_avg_sq_bytes}, {"comm", 4096}};
  }

  std::vector<v1::JoinResponse> w_;
};

TEST_F(DashboardTest, ListEventsPagesOldestFirstWithReasons) {
  StableWorldOfTwo();
  std::vector<v1::Event> events;
  v1::ListEventsRequest req;
  req.set_page_size(2);
  for (int pages = 0; pages < 100; ++pages) {
    v1::ListEventsResponse resp;
    ASSERT_TRUE(dashboard_->ListEvents(Ctx().get(), req, &resp).ok());
    EXPECT_LE(resp.events_size(), 2);
    events.insert(events.end(), resp.events().begin(), resp.events().end());
    req.set_after_seq(resp.next_seq());
    if (!resp.more()) break;
  }
  std::vector<std::string> kinds;
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i].seq(), static_cast<int64_t>(i + 1));
    EXPECT_GT(events[i].time_ms(), 0);
    kinds.push_back(events[i].kind());
  }
  EXPECT_EQ(kinds,
            (std::vector<std::string>{"waiting", "join", "waiting", "join",
                                      "propose", "commit", "stable", "join"}));
  const std::string& why = events[4].reason();
  EXPECT_NE(why.find("member w1 joined"), std::string::npos) << why;
  EXPECT_NE(why.find("world 2 = largest multiple of I=2"), std::string::npos)
      << why;
  EXPECT_NE(why.find("member w1 took rank 1"), std::string::npos) << why;
}

TEST_F(DashboardTest, WatchEventsFollowsNewEvents) {
  StableWorldOfTwo();
  auto ctx = Ctx();
  v1::WatchEventsRequest req;
  req.set_after_seq(-1);  // only new ones
  auto stream = dashboard_->WatchEvents(ctx.get(), req);
  // The server fixes the stream's position before it sends the metadata.
  stream->WaitForInitialMetadata();
  v1::DrainWorkerRequest drain;
  drain.set_name("w1");
  v1::DrainWorkerResponse dresp;
  ASSERT_TRUE(admin_->DrainWorker(Ctx().get(), drain, &dresp).ok());
  v1::Event e;
  ASSERT_TRUE(stream->Read(&e));
  EXPECT_EQ(e.kind(), "drain");
  EXPECT_NE(e.reason().find("w1"), std::string::npos);
  ASSERT_TRUE(stream->Read(&e));  // the re-plan that follows
  EXPECT_EQ(e.kind(), "propose");
  EXPECT_NE(e.reason().find("member w2 took rank 1 from w1"), std::string::npos)
      << e.reason();
  ctx->TryCancel();
}

TEST_F(DashboardTest, TelemetryLedgerAndExplain) {
  int64_t epoch = StableWorldOfTwo();
  std::map<std::string, int64_t> off = Predicted(1);
  off["master"] += 64;
  Report(epoch, 7, {Predicted(0), off, {{"comm", 1}}});

  v1::GetTelemetryRequest treq;
  treq.set_samples(5);
  v1::GetTelemetryResponse tel;
  ASSERT_TRUE(dashboard_->GetTelemetry(Ctx().get(), treq, &tel).ok());
  ASSERT_EQ(tel.ranks_size(), 3);  // two ranks and the spare
  EXPECT_EQ(tel.ranks(0).rank(), 0);
  EXPECT_EQ(tel.ranks(0).latest().step(), 7);
  EXPECT_DOUBLE_EQ(tel.ranks(0).latest().step_ms(), 35.0);
  EXPECT_EQ(tel.ranks(0).samples_size(), 1);
  EXPECT_DOUBLE_EQ(tel.mean_step_ms(), 35.5);  // over ranks only
  EXPECT_DOUBLE_EQ(tel.max_step_ms(), 36.0);
  EXPECT_DOUBLE_EQ(tel.mean_loss(), 1.0);
  ASSERT_EQ(tel.mean_phases_size(), 3);
  EXPECT_DOUBLE_EQ(tel.mean_phases(0).ms(), 20.5);
  treq.set_rank(1);
  ASSERT_TRUE(dashboard_->GetTelemetry(Ctx().get(), treq, &tel).ok());
  ASSERT_EQ(tel.ranks_size(), 1);
  EXPECT_EQ(tel.ranks(0).name(), "w1");

  v1::GetLedgerResponse ledger;
  ASSERT_TRUE(
      dashboard_->GetLedger(Ctx().get(), v1::GetLedgerRequest(), &ledger).ok());
  EXPECT_EQ(ledger.stage(), "zero1");
  EXPECT_EQ(ledger.world(), 2);
  EXPECT_EQ(ledger.stages_size(), 4);
  ASSERT_EQ(ledger.ranks_size(), 2);
  const v1::RankLedger& r0 = ledger.ranks(0);
  EXPECT_EQ(r0.worker(), "w0");
  EXPECT_GT(r0.predicted_bytes(), 0);
  EXPECT_EQ(r0.measured_bytes(), r0.predicted_bytes());
  EXPECT_EQ(r0.comm_bytes(), 4096);
  const v1::RankLedger& r1 = ledger.ranks(1);
  EXPECT_EQ(r1.measured_bytes() - r1.predicted_bytes(), 64);
  EXPECT_EQ(r1.categories().at("master").measured() -
                r1.categories().at("master").predicted(),
            64);

  v1::ExplainResponse explain;
  ASSERT_TRUE(
      dashboard_->Explain(Ctx().get(), v1::ExplainRequest(), &explain).ok());
  std::string text;
  for (const std::string& s : explain.sentences()) text += s + " ";
  EXPECT_NE(text.find("1 spare(s): w2"), std::string::npos) << text;
  EXPECT_NE(text.find("Ranks: 0=w0, 1=w1"), std::string::npos) << text;
}

TEST_F(DashboardTest, LedgerNeedsACommittedEpoch) {
  v1::GetLedgerResponse ledger;
  EXPECT_EQ(dashboard_->GetLedger(Ctx().get(), v1::GetLedgerRequest(), &ledger)
                .error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
}

// /metrics must be valid Prometheus text: parsed by prometheus_client's own
// parser (python3-prometheus-client), which prints the rank samples.
TEST_F(DashboardTest, PerRankMetricsParseAsPrometheusText) {
  int64_t epoch = StableWorldOfTwo();
  Report(epoch, 7, {Predicted(0), Predicted(1)});
  httplib::Client http("127.0.0.1", coordinator_->http_port());
  auto res = http.Get("/metrics");
  ASSERT_TRUE(res) << "no answer from /metrics";
  std::string path = ::testing::TempDir() + "/zshard_metrics.txt";
  std::ofstream(path) << res->body;
  std::string cmd =
      "/usr/bin/python3 -c '"
      "import sys\n"
      "from prometheus_client.parser import text_string_to_metric_families\n"
      "for f in text_string_to_metric_families(open(sys.argv[1]).read()):\n"
      "  for s in f.samples:\n"
      "    if s.name.startswith(\"zshard_rank_\"):\n"
      "      l = s.labels\n"
      "      print(s.name, l[\"rank\"], l[\"worker\"], l.get(\"phase\", "
      "l.get(\"category\", \"-\")), s.value)\n"
      "' " +
      path + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), pipe)) out.append(buf, n);
  ASSERT_EQ(pclose(pipe), 0) << out;
  EXPECT_NE(out.find("zshard_rank_step 0 w0 - 7.0\n"), std::string::npos)
      << out;
  EXPECT_NE(out.find("zshard_rank_phase_seconds 1 w1 reduce_scatter 0.021\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("zshard_rank_memory_bytes 0 w0 master " +
                     std::to_string(Predicted(0)["master"]) + ".0\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("zshard_rank_loss 1 w1 - 1.5\n"), std::string::npos)
      << out;
  EXPECT_NE(out.find("zshard_rank_memory_predicted_bytes 1 w1 master " +
                     std::to_string(Predicted(1)["master"]) + ".0\n"),
            std::string::npos)
      << out;
}

}  // namespace
}  // namespace zshard::server::testing
