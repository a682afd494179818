// zshardctl plan's output for a model-parallel plan: per slot its
// data-parallel size, buckets and bytes per data-parallel rank, per worker
// its position, slot and shards (summarised by slot in large worlds), as
// tables or JSON.
#pragma once

#include <string>
#include <vector>

#include "common/plan/parallel_ledger.h"
#include "common/plan/parallel_plan.h"

namespace zshard::ctl {

// What the output shows; every pointer outlives the call.
struct ParallelPlanView {
  std::string name;  // the model's, for the header
  const plan::ParallelModel* model = nullptr;
  const plan::ParallelPlan* plan = nullptr;
  const plan::ParallelLedger* ledger = nullptr;
  // Every worker by rank, or the one worker of --rank.
  std::vector<plan::WorkerPlan> workers;
  bool one_rank = false;
};

// The header, the slot table and the worker table (the workers by slot
// past kMaxWorkerRows); with one_rank, that worker's position, its slot's
// buffers and buckets and its pieces.
std::string ParallelPlanTables(const ParallelPlanView& view);

// {"plan_hash", "parallel": {"tensor", "pipeline", "context"}, "world",
//  "replicas", "data_parallel", "instances", "bucket_size", "model_params",
//  "slot_params", "slots": [{"slot", "tp", "pp", "params", "tensors",
//  "data_parallel", "buckets", "shard_elements", "zero1_bytes", "plan":
//  PlanToJson's object without ranks}], "workers": [{"rank", "replica",
//  "tp", "pp", "cp", "slot", "dp_rank", "instance", "shard_rank",
//  "owned_elements", "pieces", "zero1_bytes"}]}; with one_rank the one
//  worker also has "shards" (PlanToJson's).
std::string ParallelPlanJson(const ParallelPlanView& view);

}  // namespace zshard::ctl
