// The job's plans by world size, made once each and kept, with their
// hashes ("" for a world the plan cannot be made for). A model-parallel
// job's plans are parallel plans (one single-slot plan per slot); its
// hash is the parallel plan's.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "common/job/job_spec.h"
#include "common/plan/parallel_plan.h"
#include "common/plan/plan.h"

namespace zshard::server {

// Thread-compatible: the membership calls it under its lock. Borrows
// `spec`, which must outlive it.
class WorldPlans {
 public:
  explicit WorldPlans(const job::JobSpec* spec) : spec_(spec) {}

  // Keeps `plan`, made already for `world`.
  void Put(int world, plan::Plan plan);
  void PutParallel(int world, plan::ParallelPlan plan);
  // The plan for `world`, made on first use; null when it cannot be made
  // or the job is model-parallel.
  const plan::Plan* Get(int world);
  // A model-parallel job's plan for `world`, made on first use; null when
  // it cannot be made or the job is not model-parallel.
  const plan::ParallelPlan* GetParallel(int world);
  // Its hash; "" when it cannot be made.
  std::string Hash(int world);

 private:
  const job::JobSpec* const spec_;
  std::map<int, std::shared_ptr<const plan::Plan>> plans_;
  std::map<int, std::shared_ptr<const plan::ParallelPlan>> parallel_;
  std::map<int, std::string> hashes_;
};

}  // namespace zshard::server
