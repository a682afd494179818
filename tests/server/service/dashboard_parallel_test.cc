// A model-parallel job's plan and ledger over the DashboardService (T = 2,
// P = 2, eight workers): GetPlan lists every slot, each slot's pieces
// equal the offline planner's for that slot (its data-parallel ranks, the
// members at that slot), the ledger predicts each rank from its slot's
// plan, and the JSON routes answer as gRPC does.
#include <httplib.h>

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/plan/ledger.h"
#include "common/plan/ownership.h"
#include "common/plan/parallel.h"
#include "common/plan/parallel_plan.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "nlohmann/json.hpp"
#include "tests/server/parallel_fixture.h"

namespace zshard::server::testing {
namespace {

namespace pb = google::protobuf;

// (param, begin, end, rank, worker, buffer, bucket, offset)
using Piece = std::tuple<std::string, int64_t, int64_t, int, std::string, int,
                         int, int64_t>;

class DashboardParallelTest : public ParallelCoordinatorFixture {
 protected:
  void SetUp() override {
    ParallelCoordinatorFixture::SetUp();
    const job::JobSpec& spec = coordinator_->membership()->spec();
    model_ = job::JobParallelModel(spec);
    auto offline = plan::MakeParallelPlan(
        model_, job::JobParallelPlanOptions(spec, kWorld));
    ASSERT_TRUE(offline.ok()) << offline.status();
    offline_ = *std::move(offline);
  }

  // GetPlan's pieces for `req`, every page.
  std::vector<v1::PlanPiece> Pieces(v1::GetPlanRequest req) {
    std::vector<v1::PlanPiece> out;
    req.set_page_size(10000);
    do {
      v1::GetPlanResponse page;
      grpc::Status s = dashboard_->GetPlan(Ctx().get(), req, &page);
      EXPECT_TRUE(s.ok()) << s.error_message();
      out.insert(out.end(), page.pieces().begin(), page.pieces().end());
      req.set_page_token(page.next_page_token());
    } while (!req.page_token().empty());
    return out;
  }

  v1::GetPlanResponse Summary(const v1::GetPlanRequest& req) {
    v1::GetPlanResponse resp;
    grpc::Status s = dashboard_->GetPlan(Ctx().get(), req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp;
  }

  plan::ParallelModel model_;
  plan::ParallelPlan offline_;

  // The member at each global rank, by GetClusterStatus.
  std::map<int, std::string> Holders() {
    v1::GetClusterStatusResponse status;
    EXPECT_TRUE(dashboard_
                    ->GetClusterStatus(Ctx().get(),
                                       v1::GetClusterStatusRequest(), &status)
                    .ok());
    std::map<int, std::string> out;
    for (const v1::MemberStatus& m : status.members()) {
      if (m.rank() >= 0) out[m.rank()] = m.name();
    }
    return out;
  }

  // POST `path` with `body` to the HTTP port; the response's JSON body.
  std::string Post(const std::string& path, const std::string& body,
                   int* status) {
    httplib::Client http("127.0.0.1", coordinator_->http_port());
    http.set_read_timeout(5, 0);
    auto r = http.Post(path.c_str(), body, "application/json");
    EXPECT_TRUE(r) << path;
    *status = r ? r->status : -1;
    return r ? r->body : "";
  }
};

TEST_F(DashboardParallelTest, EverySlotsPiecesAreTheOfflinePlannersForIt) {
  const plan::ParallelSizes& sizes = offline_.sizes;
  const std::map<int, std::string> holders = Holders();
  ASSERT_EQ(holders.size(), static_cast<size_t>(kWorld));

  const v1::GetPlanResponse all = Summary(v1::GetPlanRequest());
  EXPECT_EQ(all.epoch(), epoch_);
  EXPECT_EQ(all.world(), kWorld);
  EXPECT_EQ(all.plan_hash(), offline_.hash);
  EXPECT_FALSE(all.has_slot());
  ASSERT_EQ(all.slots_size(), sizes.slots());
  for (int s = 0; s < sizes.slots(); ++s) {
    const v1::GetPlanResponse& summary = all.slots(s).plan();
    const plan::Plan& want = offline_.slots[static_cast<size_t>(s)];
    const int tp = plan::SlotTp(sizes, s);
    const int pp = plan::SlotPp(sizes, s);
    EXPECT_EQ(all.slots(s).slot().tp(), tp);
    EXPECT_EQ(all.slots(s).slot().pp(), pp);
    EXPECT_EQ(summary.world(), want.world);
    EXPECT_EQ(summary.shard_group_size(), want.shard_group_size);
    EXPECT_EQ(summary.plan_hash(), want.hash);
    // The slot's data-parallel rank k is the member at its global rank.
    std::vector<std::string> at_slot;
    for (int k = 0; k < want.world; ++k) {
      at_slot.push_back(holders.at(plan::RankOf(
          sizes, kWorld, plan::PositionOfDataParallelRank(sizes, tp, pp, k))));
    }
    ASSERT_EQ(summary.ranks_size(), want.world);
    for (int k = 0; k < want.world; ++k) {
      EXPECT_EQ(summary.ranks(k).rank(), k);
      EXPECT_EQ(summary.ranks(k).name(), at_slot[static_cast<size_t>(k)]);
    }

    const plan::ModelSpec& slot_model = model_.slots[static_cast<size_t>(s)];
    std::vector<plan::Member> members;
    for (const std::string& name : at_slot) members.push_back({name, ""});
    auto ownership = plan::MakeOwnership(slot_model, want, members);
    ASSERT_TRUE(ownership.ok()) << ownership.status();
    std::vector<Piece> expected;
    for (const plan::OwnedRange& r : ownership->ranges) {
      expected.emplace_back(slot_model.params[r.param_index].name, r.begin,
                            r.end, r.rank, at_slot[r.rank], r.buffer, r.bucket,
                            r.offset_in_bucket);
    }
    std::vector<Piece> got;
    v1::GetPlanRequest req;
    req.mutable_slot()->set_tp(tp);
    req.mutable_slot()->set_pp(pp);
    const v1::GetPlanResponse slot_plan = Summary(req);
    EXPECT_EQ(slot_plan.slot().tp(), tp);
    EXPECT_EQ(slot_plan.slot().pp(), pp);
    EXPECT_EQ(slot_plan.plan_hash(), want.hash);
    ASSERT_EQ(slot_plan.buffers_size(), static_cast<int>(want.buffers.size()));
    for (int b = 0; b < slot_plan.buffers_size(); ++b) {
      for (int k = 0; k < slot_plan.buffers(b).buckets(); ++k) {
        req.set_buffer(b);
        req.set_bucket(k);
        for (const v1::PlanPiece& p : Pieces(req)) {
          got.emplace_back(p.param(), p.param_begin(), p.param_end(), p.rank(),
                           p.worker(), p.buffer(), p.bucket(),
                           p.offset_in_bucket());
        }
      }
    }
    std::sort(expected.begin(), expected.end());
    std::sort(got.begin(), got.end());
    EXPECT_FALSE(got.empty());
    EXPECT_EQ(got, expected) << "slot (tp " << tp << ", pp " << pp << ")";
  }
}

TEST_F(DashboardParallelTest, LedgerPredictsEachRankFromItsSlotsPlan) {
  const plan::ParallelSizes& sizes = offline_.sizes;
  v1::GetLedgerResponse ledger;
  grpc::Status s =
      dashboard_->GetLedger(Ctx().get(), v1::GetLedgerRequest(), &ledger);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(ledger.stages_size(), 0);
  ASSERT_EQ(ledger.ranks_size(), kWorld);
  for (const v1::RankLedger& r : ledger.ranks()) {
    const plan::Position pos = plan::PositionOf(sizes, kWorld, r.rank());
    const int slot = plan::SlotIndex(sizes, pos.tp, pos.pp);
    EXPECT_EQ(r.slot().tp(), pos.tp);
    EXPECT_EQ(r.slot().pp(), pos.pp);
    EXPECT_EQ(r.dp_rank(), plan::DataParallelRank(sizes, pos));
    EXPECT_EQ(r.predicted_bytes(),
              plan::RankStageBytes(model_.slots[static_cast<size_t>(slot)],
                                   offline_.slots[static_cast<size_t>(slot)],
                                   r.dp_rank(), plan::Stage::kZero1)
                  .total_bytes);
  }
}

TEST_F(DashboardParallelTest, JsonRoutesAnswerAsGrpcDoes) {
  const std::string plan_path = "/zshard.v1.DashboardService/GetPlan";
  for (const std::string& body :
       {std::string("{}"), std::string(R"({"slot": {"tp": 1, "pp": 1}})"),
        std::string(R"({"slot": {"pp": 1}, "bucket": 0, "pageSize": 3})"),
        std::string(R"({"slot": {"tp": 1}, "moves": true, "rank": 1})")}) {
    v1::GetPlanRequest req;
    ASSERT_TRUE(pb::util::JsonStringToMessage(body, &req).ok()) << body;
    v1::GetPlanResponse via_grpc;
    grpc::Status s = dashboard_->GetPlan(Ctx().get(), req, &via_grpc);
    ASSERT_TRUE(s.ok()) << body << ": " << s.error_message();
    int status = 0;
    const std::string json = Post(plan_path, body, &status);
    ASSERT_EQ(status, 200) << body << ": " << json;
    v1::GetPlanResponse via_http;
    ASSERT_TRUE(pb::util::JsonStringToMessage(json, &via_http).ok()) << json;
    EXPECT_TRUE(pb::util::MessageDifferencer::Equals(via_grpc, via_http))
        << body << "\n"
        << json;
  }
  v1::GetLedgerResponse ledger;
  ASSERT_TRUE(
      dashboard_->GetLedger(Ctx().get(), v1::GetLedgerRequest(), &ledger).ok());
  int status = 0;
  const std::string json =
      Post("/zshard.v1.DashboardService/GetLedger", "{}", &status);
  ASSERT_EQ(status, 200) << json;
  v1::GetLedgerResponse via_http;
  ASSERT_TRUE(pb::util::JsonStringToMessage(json, &via_http).ok()) << json;
  EXPECT_TRUE(pb::util::MessageDifferencer::Equals(ledger, via_http)) << json;
}

TEST_F(DashboardParallelTest, BadSlotsAndSlotlessQueriesAreRefused) {
  for (const char* body :
       {R"({"slot": {"tp": 2}})", R"({"slot": {"pp": -1}})", R"({"rank": 0})",
        R"({"bucket": 0})", R"({"moves": true})"}) {
    int status = 0;
    const std::string json =
        Post("/zshard.v1.DashboardService/GetPlan", body, &status);
    EXPECT_EQ(status, 400) << body << ": " << json;
    nlohmann::json error = nlohmann::json::parse(json, nullptr, false);
    EXPECT_EQ(error.value("code", ""), "invalid_argument") << json;
  }
  v1::GetPlanRequest req;
  req.mutable_slot()->set_tp(5);
  v1::GetPlanResponse resp;
  grpc::Status s = dashboard_->GetPlan(Ctx().get(), req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(),
            "slot (tp 5, pp 0) is not in the job's 2 x 2 slots");
}

}  // namespace
}  // namespace zshard::server::testing
