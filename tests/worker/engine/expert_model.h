// Test support: a small model of dense and expert params (docs/design.md
// section 3: expert params get buffers of their own, sharded over the D / E
// ranks of an expert shard group), its plan, and the reference optimizer
// of the synthetic workload with expert_parallel E.
#pragma once

#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/worker/engine/reference_optimizer.h"
#include "client/worker/engine/synthetic_workload.h"
#include "common/plan/plan.h"
#include "gtest/gtest.h"

namespace zshard::engine::testing {

// Seven params, dense and expert interleaved in registration order, one of
// each kind without weight decay: with bucket_size 600 both buffers get
// several padded buckets.
inline plan::ModelSpec ExpertModel(plan::DType dtype = plan::DType::kBf16) {
  struct P {
    const char* name;
    int64_t size;
    bool expert;
  };
  const P params[] = {{"d0", 1000, false}, {"x0", 700, true},
                      {"d1", 300, false},  {"x1", 1500, true},
                      {"d2", 7, false},    {"x2", 130, true},
                      {"d3", 900, false}};
  plan::ModelSpec spec;
  spec.name = "experts";
  for (const P& p : params) {
    plan::ParamSpec s;
    s.name = p.name;
    s.shape = {p.size};
    s.dtype = dtype;
    s.expert = p.expert;
    s.no_weight_decay = s.name == "d2" || s.name == "x2";
    spec.params.push_back(s);
  }
  return spec;
}

inline plan::Plan ExpertPlan(const plan::ModelSpec& model, int world,
                             int instances, int experts,
                             int64_t bucket_size = 600) {
  plan::PlanOptions po;
  po.world = world;
  po.instances = instances;
  po.layout.bucket_size = bucket_size;
  po.layout.expert_parallel = experts;
  absl::StatusOr<plan::Plan> plan = plan::MakePlan(model, po);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return *plan;
}

// Synthetic workloads of every rank of a world of `world` with
// expert_parallel `experts`.
inline std::vector<std::unique_ptr<Workload>> ExpertWorkloads(
    const plan::ModelSpec& model, int world, int experts,
    int64_t global_batch) {
  std::vector<std::unique_ptr<Workload>> out;
  for (int r = 0; r < world; ++r) {
    SyntheticWorkload::Options o;
    o.global_batch = global_batch;
    o.world = world;
    o.rank = r;
    o.expert_parallel = experts;
    out.push_back(std::make_unique<SyntheticWorkload>(model, o));
  }
  return out;
}

// The reference with each expert copy initialised from the workload of an
// expert-parallel rank e (rank e of a world of E).
inline std::unique_ptr<ReferenceOptimizer> ExpertReference(
    const plan::ModelSpec& model, ReferenceOptimizer::Options options,
    int64_t global_batch) {
  const int e = options.expert_parallel;
  std::vector<std::unique_ptr<Workload>> init =
      ExpertWorkloads(model, e, e, global_batch);
  std::vector<const Workload*> ptrs;
  for (const auto& w : init) ptrs.push_back(w.get());
  return std::make_unique<ReferenceOptimizer>(model, options, ptrs);
}

}  // namespace zshard::engine::testing
