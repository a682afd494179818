// ReferenceOptimizer: a single-process, unsharded AdamW over every param
// with full fp32 master/m/v, fed by the same per-rank workloads as the
// engine. It rounds gradients as the engine's collectives do (each rank's
// sum to the grad dtype, the shard group's sum in group-rank order in fp32
// rounded once, then the sum across instances rounded once), so the
// engine's masters can be checked against it to float rounding. For tests
// and checks only.
//
// Expert params with expert_parallel E (engine_groups.h, the synthetic
// workload's definition): E copies, one per expert-parallel rank e, each
// trained on the gradients of the ranks r with r % E == e (its expert shard
// group of D / E ranks in every instance); the global norm counts every
// copy.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "client/worker/engine/workload.h"
#include "common/job/job_spec.h"
#include "common/plan/model_spec.h"

namespace zshard::engine {

class ReferenceOptimizer {
 public:
  struct Options {
    int world = 1;      // W: number of rank workloads per step
    int instances = 1;  // I, divides W
    bool grad_reduce_in_fp32 = false;
    // E, divides world / instances; with E > 1 every expert param has E
    // copies.
    int expert_parallel = 1;
    job::OptimizerSpec optimizer;
  };

  // Initial params from `init` (rounded to each param's dtype); masters
  // start as the rounded values. Every expert copy starts from `init`'s
  // values: with E > 1 and expert params, use the constructor below.
  ReferenceOptimizer(const plan::ModelSpec& model, const Options& options,
                     const Workload& init);
  // The same with init[e] giving expert-parallel rank e's experts (a
  // workload of a rank with rank % E == e, e.g. rank e) and init[0] the
  // dense params. Step fails with InvalidArgument unless init.size() == E.
  ReferenceOptimizer(const plan::ModelSpec& model, const Options& options,
                     const std::vector<const Workload*>& init);

  // One training step: rank r's gradients from rank_workloads[r]
  // (rank_workloads.size() == world). Returns true when Adam was applied,
  // false when a non-finite gradient skipped the step.
  absl::StatusOr<bool> Step(const std::vector<Workload*>& rank_workloads);

  // Step in two halves, for a model-parallel job whose slots (one
  // reference each) share one grad norm: Reduce computes and keeps the
  // step's reduced gradients and returns their squared norm, leaving out
  // the params flagged in `norm_skips` (by index; empty: none), and whether
  // all were finite; Apply then runs Adam with the world's squared norm
  // (the sum over slots), or skips the step when any slot's gradient was
  // non-finite (`finite` false). Returns what Step returns.
  struct Reduced {
    double sum_squares = 0;
    bool finite = true;
  };
  absl::StatusOr<Reduced> Reduce(const std::vector<Workload*>& rank_workloads,
                                 const std::vector<bool>& norm_skips = {});
  absl::StatusOr<bool> Apply(double sum_squares, bool finite);

  // Changes W and I for the following steps, as a re-shard does: the
  // gradients are then rounded as the new world's collectives round them;
  // the state is unchanged. Requires world % instances == 0 and E to
  // divide world / instances.
  void set_topology(int world, int instances) {
    options_.world = world;
    options_.instances = instances;
  }

  // The fp32 master of param p (fp32 params: the param itself). An expert
  // param's E copies are concatenated: expert-parallel rank e's at
  // [e * numel, (e + 1) * numel).
  const std::vector<float>& master(int p) const { return master_[p]; }
  int64_t adam_step() const { return adam_step_; }
  double last_grad_norm() const { return last_grad_norm_; }

 private:
  // Copies of param p: E for an expert param, else 1.
  int Copies(int p) const;

  const plan::ModelSpec model_;
  Options options_;
  absl::Status init_status_;
  std::vector<std::vector<float>> master_, m_, v_, param_;
  // Reduce's result, for Apply.
  std::vector<std::vector<float>> grads_;
  double batch_ = 1;
  int64_t step_ = 0;
  int64_t adam_step_ = 0;
  double last_grad_norm_ = 0;
};

}  // namespace zshard::engine
