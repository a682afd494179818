// JSON rendering of plans (nlohmann stays in this file).
#include "common/plan/plan_json.h"

#include <utility>

#include "nlohmann/json.hpp"

namespace zshard::plan {
namespace {

using Json = nlohmann::ordered_json;

Json BufferJson(const ModelSpec& model, const Buffer& buffer) {
  Json j;
  j["param_dtype"] = DTypeName(buffer.key.param_dtype);
  j["grad_dtype"] = DTypeName(buffer.key.grad_dtype);
  j["expert"] = buffer.key.expert;
  j["shard_group_size"] = buffer.shard_group_size;
  j["numel"] = buffer.numel;
  Json buckets = Json::array();
  for (const Bucket& b : buffer.buckets) {
    buckets.push_back({{"start", b.start},
                       {"end", b.end},
                       {"numel_unpadded", b.numel_unpadded}});
  }
  j["buckets"] = std::move(buckets);
  Json params = Json::array();
  for (const ParamSlot& p : buffer.params) {
    params.push_back({{"name", model.params[p.param_index].name},
                      {"start", p.start},
                      {"end", p.end},
                      {"bucket", p.bucket}});
  }
  j["params"] = std::move(params);
  return j;
}

Json RankJson(const ModelSpec& model, const RankPlan& rank) {
  Json j;
  j["rank"] = rank.rank;
  j["instance"] = rank.instance;
  j["shard_rank"] = rank.shard_rank;
  Json shards = Json::array();
  for (const Shard& s : rank.shards) {
    Json pieces = Json::array();
    for (const Piece& p : s.pieces) {
      pieces.push_back({{"param", model.params[p.param_index].name},
                        {"start", p.start},
                        {"end", p.end},
                        {"param_start", p.param_start},
                        {"param_end", p.param_end}});
    }
    shards.push_back({{"buffer", s.buffer},
                      {"bucket", s.bucket},
                      {"start", s.start},
                      {"end", s.end},
                      {"pieces", std::move(pieces)}});
  }
  j["shards"] = std::move(shards);
  return j;
}

}  // namespace

std::string PlanToJson(const ModelSpec& model, const Plan& plan,
                       const std::vector<RankPlan>& ranks) {
  Json j;
  j["plan_hash"] = plan.hash;
  j["world"] = plan.world;
  j["instances"] = plan.instances;
  j["shard_group_size"] = plan.shard_group_size;
  j["bucket_size"] = plan.bucket_size;
  Json buffers = Json::array();
  for (const Buffer& b : plan.buffers) buffers.push_back(BufferJson(model, b));
  j["buffers"] = std::move(buffers);
  Json out_ranks = Json::array();
  for (const RankPlan& r : ranks) out_ranks.push_back(RankJson(model, r));
  j["ranks"] = std::move(out_ranks);
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace zshard::plan
