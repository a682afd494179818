// The committed epoch's plan, made once per epoch and shared by the
// dashboard's queries (plan, ledger, metrics), so a query on a large plan
// costs a lookup, not a re-plan. A model-parallel job's is one
// single-slot plan per slot, each over its slot's data-parallel domain.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/job/job_spec.h"
#include "common/plan/parallel_plan.h"
#include "common/plan/plan.h"
#include "server/state/types.h"
#include "server/views/plan_index.h"

namespace zshard::server {

struct CachedPlan {
  int64_t epoch = 0;
  // The plan's model: the job's, or its slot's (owned by the PlanCache,
  // which must outlive this).
  const plan::ModelSpec* model = nullptr;
  plan::Plan plan;
  PlanIndex index;  // ownership by param, members by worker id
  // The epoch as the plan's ranks see it: the committed epoch, or for a
  // slot its data-parallel domain by data-parallel rank with the slot's
  // moves (their ranks are the slot's).
  EpochPlan ranks;
};

// A model-parallel job's committed epoch: a CachedPlan per slot, by slot
// index (tp + T x pp).
struct CachedParallelPlan {
  int64_t epoch = 0;
  int world = 0;
  std::vector<std::shared_ptr<const CachedPlan>> slots;
};

// Thread-safe. Borrows `spec`, which must outlive it. Keeps one plan: the
// latest asked for.
class PlanCache {
 public:
  explicit PlanCache(const job::JobSpec* spec);

  // The plan and index of the committed `epoch`, made on the first call
  // for the epoch (blocks other callers meanwhile). Requires epoch.epoch >
  // 0. FailedPrecondition for a model-parallel job (GetParallel); errors
  // from plan::MakePlan and BuildPlanIndex.
  absl::StatusOr<std::shared_ptr<const CachedPlan>> Get(const EpochPlan& epoch);
  // A model-parallel job's slot plans of the committed `epoch`, as Get.
  // FailedPrecondition for a job without model parallelism; errors from
  // plan::MakeParallelPlan and BuildPlanIndex.
  absl::StatusOr<std::shared_ptr<const CachedParallelPlan>> GetParallel(
      const EpochPlan& epoch);

 private:
  const job::JobSpec* const spec_;
  // A model-parallel job's slot models (empty otherwise).
  const plan::ParallelModel parallel_model_;
  absl::Mutex mu_;
  std::shared_ptr<const CachedPlan> last_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const CachedParallelPlan> last_parallel_ ABSL_GUARDED_BY(mu_);
};

}  // namespace zshard::server
