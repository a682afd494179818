// Renders a plan and rank plans in the JSON contract that zshardctl plan
// --output json prints and other tools read (issue 2).
#pragma once

#include <string>
#include <vector>

#include "common/plan/model_spec.h"
#include "common/plan/plan.h"

namespace zshard::plan {

// {"plan_hash", "world", "instances", "shard_group_size", "bucket_size",
//  "buffers": [{"param_dtype", "grad_dtype", "expert", "shard_group_size",
//  "numel", "buckets": [{"start", "end", "numel_unpadded"}], "params":
//  [{"name", "start", "end", "bucket"}]}], "ranks": [{"rank", "instance",
//  "shard_rank", "shards": [{"buffer", "bucket", "start", "end", "pieces":
//  [{"param", "start", "end", "param_start", "param_end"}]}]}]}.
// `plan` must have been made from `model`; `ranks` are listed as given.
std::string PlanToJson(const ModelSpec& model, const Plan& plan,
                       const std::vector<RankPlan>& ranks);

}  // namespace zshard::plan
