// The job's plans by world size, made once each and kept, with their
// hashes ("" for a world the plan cannot be made for).
#pragma once

#include <map>
#include <memory>
#include <string>

#include "common/job/job_spec.h"
#include "common/plan/plan.h"

namespace zshard::server {

// Thread-compatible: the membership calls it under its lock. Borrows
// `spec`, which must outlive it.
class WorldPlans {
 public:
  explicit WorldPlans(const job::JobSpec* spec) : spec_(spec) {}

  // Keeps `plan`, made already for `world`.
  void Put(int world, plan::Plan plan);
  // The plan for `world`, made on first use; null when it cannot be made.
  const plan::Plan* Get(int world);
  // Its hash; "" when it cannot be made.
  std::string Hash(int world);

 private:
  const job::JobSpec* const spec_;
  std::map<int, std::shared_ptr<const plan::Plan>> plans_;
  std::map<int, std::string> hashes_;
};

}  // namespace zshard::server
