// The committed epoch's plan, made once per epoch and shared by the
// dashboard's queries (plan, ledger, metrics), so a query on a large plan
// costs a lookup, not a re-plan.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/job/job_spec.h"
#include "common/plan/plan.h"
#include "server/state/types.h"
#include "server/views/plan_index.h"

namespace zshard::server {

struct CachedPlan {
  int64_t epoch = 0;
  plan::Plan plan;
  PlanIndex index;  // ownership by param, members by worker id
};

// Thread-safe. Borrows `spec`, which must outlive it. Keeps one plan: the
// latest asked for.
class PlanCache {
 public:
  explicit PlanCache(const job::JobSpec* spec) : spec_(spec) {}

  // The plan and index of the committed `epoch`, made on the first call
  // for the epoch (blocks other callers meanwhile). Requires epoch.epoch >
  // 0. Errors from plan::MakePlan and BuildPlanIndex.
  absl::StatusOr<std::shared_ptr<const CachedPlan>> Get(const EpochPlan& epoch);

 private:
  const job::JobSpec* const spec_;
  absl::Mutex mu_;
  std::shared_ptr<const CachedPlan> last_ ABSL_GUARDED_BY(mu_);
};

}  // namespace zshard::server
