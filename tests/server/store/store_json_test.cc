// The stores' JSON readers on damaged values (a hand-edited etcd key, a
// value of another type): each field of the wrong type reads as its default
// and nothing throws.
#include "server/store/store_json.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace zshard::server {
namespace {

TEST(StoreJsonTest, FieldOrTakesOnlyTheFallbacksType) {
  const nlohmann::json j = {{"s", "text"},    {"i", 7},    {"b", true},
                            {"d", 2.5},       {"neg", -3}, {"si", "7"},
                            {"o", {{"k", 1}}}};
  EXPECT_EQ(FieldOr(j, "s", ""), "text");
  EXPECT_EQ(FieldOr(j, "i", ""), "");  // an integer is no string
  EXPECT_EQ(FieldOr(j, "i", int64_t{0}), 7);
  EXPECT_EQ(FieldOr(j, "si", int64_t{-1}), -1);  // a string is no integer
  EXPECT_EQ(FieldOr(j, "d", 0), 0);              // 2.5 is no integer
  EXPECT_EQ(FieldOr(j, "d", 0.0), 2.5);
  EXPECT_EQ(FieldOr(j, "neg", 0), -3);
  EXPECT_TRUE(FieldOr(j, "b", false));
  EXPECT_FALSE(FieldOr(j, "i", false));
  EXPECT_EQ(FieldOr(j, "o", nlohmann::json()).value("k", 0), 1);
  EXPECT_TRUE(FieldOr(j, "o", nlohmann::json::array()).empty());
  EXPECT_EQ(FieldOr(j, "o", nlohmann::json::object()).size(), 1u);
  EXPECT_EQ(FieldOr(j, "missing", 4), 4);
  EXPECT_EQ(FieldOr(nlohmann::json::array({1, 2}), "i", 9), 9);
  EXPECT_EQ(FieldOr(nlohmann::json("scalar"), "i", 9), 9);
}

TEST(StoreJsonTest, DamagedMemberAndEpochValuesReadAsDefaults) {
  Member m;
  ASSERT_TRUE(MemberFromJson(
      R"({"worker_id": "w-1", "name": 5, "rank": "x", "labels": [1],
          "device": "gpu", "state": 3})",
      &m));
  EXPECT_EQ(m.worker_id, "w-1");
  EXPECT_EQ(m.name, "");
  EXPECT_TRUE(m.labels.empty());
  EXPECT_EQ(m.device.kind, "");

  EpochPlan plan;
  plan.spares = 2;
  EpochExtraFromJson(
      R"({"summary": "many", "resume_adam_step": "5",
          "finish_pending_step": 1, "commit_values": {"a": 1},
          "spares": 1.5, "restore": {"step": "9", "dir": 3}})",
      &plan);
  EXPECT_EQ(plan.summary.moves, 0);
  EXPECT_EQ(plan.resume_adam_step, 0);
  EXPECT_FALSE(plan.finish_pending_step);
  EXPECT_TRUE(plan.commit_values.empty());
  EXPECT_EQ(plan.spares, 2);
  EXPECT_EQ(plan.restore.step, -1);
  EXPECT_EQ(plan.restore.dir, "");

  // A slot of wrong-typed fields reads as defaults; what is no object (a
  // slot) or no array of six (a move) is skipped.
  const std::vector<Slot> slots =
      SlotsFromJson(R"([{"worker_id": 1, "rank": "r"}, 7])");
  ASSERT_EQ(slots.size(), 1u);
  EXPECT_EQ(slots[0].worker_id, "");
  EXPECT_EQ(slots[0].rank, -1);
  EXPECT_TRUE(MovesFromJson(R"([["a"], {"b": 1}, 3])").empty());
}

}  // namespace
}  // namespace zshard::server
