// Which world the coordinator proposes: the resize policy's choice for the
// healthy members under the operator's cap, among the worlds the job's plan
// can be made for, and why none can be formed when none can.
#pragma once

#include <string>

#include "common/job/job_spec.h"
#include "server/membership/transition/world_plans.h"

namespace zshard::server {

// Thread-compatible: the membership calls it under its lock. Borrows
// `spec`, which must outlive it.
class WorldChoice {
 public:
  explicit WorldChoice(const job::JobSpec* spec) : spec_(spec), plans_(spec) {}

  // The job's plans by world size.
  WorldPlans& plans() { return plans_; }
  // The operator's cap on the world (0: none).
  int target() const { return target_; }
  void set_target(int world) { target_ = world; }

  // The world to propose for `healthy` members (0: none viable): the
  // policy's choice under the cap, skipping downwards the worlds the plan
  // cannot be made for (e.g. expert_parallel not dividing D).
  int Choose(int healthy);
  // Why `chosen` is the world for `healthy` members (ExplainWorld, or
  // ExplainParallelWorld for a model-parallel job).
  std::string Explain(int chosen, int healthy) const;
  // Why `healthy` members form no world.
  std::string Unviable(int healthy) const;
  // Records `why` no world can be formed now; true when it differs from
  // the reason recorded last (worth an event). Clear() when one can.
  bool NoteUnviable(const std::string& why);
  void Clear() { last_unviable_.clear(); }
  // The reason NoteUnviable recorded last (empty after Clear).
  const std::string& last_unviable() const { return last_unviable_; }

 private:
  const job::JobSpec* const spec_;
  WorldPlans plans_;
  int target_ = 0;
  std::string last_unviable_;
};

}  // namespace zshard::server
