// The job spec: what a coordinator runs (model, layout, optimizer, world
// bounds, leases, workload, checkpoints), parsed from JSON with one clear
// InvalidArgument line per problem.
//
// The member initialisers below are the job spec's defaults, each written
// once: the field table (job_spec_fields.h) reads them for the parser, the
// serialiser and the generated docs (docs/reference/job-spec.md), and holds
// each field's range and one-line doc.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/job/lr_schedule.h"
#include "common/plan/model_spec.h"
#include "common/plan/parallel_plan.h"
#include "common/plan/plan.h"
#include "nlohmann/json_fwd.hpp"

namespace zshard::job {

// Adam hyperparameters.
struct OptimizerSpec {
  double lr = 0.001;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;    // decoupled, AdamW
  double clip_grad_norm = 0.0;  // 0 disables clipping
  // The rate of each training step (LearningRate). Default constant lr.
  LrSchedule lr_schedule;
};

// How the world follows the healthy members (world.resize; docs/design.md
// section 6).
enum class ResizePolicy {
  // The shard group D = max / instances stays fixed; the world is I' whole
  // instances of D, I' in [1, instances]. A failed rank with no spare
  // dissolves its instance (no bytes move); joiners wait as spares until D
  // of them form a whole instance.
  kKeepD,
  // The instance count I = instances stays fixed; W is the largest multiple
  // of I, so D = W / I changes with the world.
  kKeepI,
};

// "keep_d", "keep_i".
const char* ResizePolicyName(ResizePolicy policy);

// The policy named `name` (as ResizePolicyName writes it); InvalidArgument
// naming world.resize otherwise.
absl::StatusOr<ResizePolicy> ParseResizePolicy(absl::string_view name);

// World bounds and the resize policy: the world is the largest W in
// [min, min(healthy members, max)] that is a multiple of `instances`
// (keep_i) or of D = max / instances (keep_d).
struct WorldSpec {
  int instances = 2;  // divides max
  int min = 2;
  int max = 4;  // >= min
  // ParseJobSpec's default is keep_d when instances >= 2 and keep_i when
  // instances == 1; a WorldSpec made in code is keep_i unless set.
  ResizePolicy resize = ResizePolicy::kKeepI;
};

// The resize policy ParseJobSpec gives a world of `instances` when
// world.resize is absent.
ResizePolicy DefaultResizePolicy(int instances);

// The step between the worlds the policy allows: `instances` (keep_i) or
// D = max / instances (keep_d).
int WorldStep(const WorldSpec& world);

// The instance count of a world of `w` ranks: `instances` (keep_i), or
// w / D (keep_d; 0 when D does not divide w).
int InstancesOf(const WorldSpec& world, int w);

enum class WorkloadKind { kIdle, kSynthetic, kRegression, kTrainer };

// "idle", "synthetic", "regression", "trainer".
const char* WorkloadKindName(WorkloadKind kind);

struct WorkloadSpec {
  WorkloadKind kind = WorkloadKind::kIdle;
  int64_t steps = 0;  // 0: run until stopped
  int64_t global_batch = 64;
  int64_t step_delay_ms = 100;  // the built-in workloads' pause per step
  // trainer workload: how long a daemon waits for its trainer process (to
  // attach, to come back after it died, to finish a backward pass) before
  // it hands its state over and leaves. Keep it below the workers'
  // collective timeout (30 s): peers wait in the step's first collective
  // meanwhile.
  int64_t trainer_timeout_ms = 20000;
};

struct CheckpointSpec {
  std::string dir;          // empty: no checkpoints
  int64_t every_steps = 0;  // 0: never; > 0 requires dir
};

// A job that does not set transition_timeout_ms waits this many leases.
constexpr int64_t kDefaultTransitionTimeoutLeases = 4;
// A job that does not set transition_settle_ms settles for this long, or
// half a lease when that is shorter.
constexpr int64_t kDefaultTransitionSettleMs = 300;

constexpr int64_t DefaultTransitionTimeoutMs(int64_t lease_timeout_ms) {
  return kDefaultTransitionTimeoutLeases * lease_timeout_ms;
}

constexpr int64_t DefaultTransitionSettleMs(int64_t lease_timeout_ms) {
  return std::min(kDefaultTransitionSettleMs, lease_timeout_ms / 2);
}

struct JobSpec {
  std::string name;          // of [A-Za-z0-9._-]
  std::string model_preset;  // the preset name, or empty for inline params
  // Resolved (preset or inline); no params when a trainer job left the
  // model out and has not taken its first trainer's yet (HasModel), and
  // none in a model-parallel job (its params are in slots).
  plan::ModelSpec model;
  // Tensor, pipeline and context parallel sizes (docs/design.md section
  // 13). Any of them above 1 makes a model-parallel job: its model is
  // `slots`, and world.max and world.min are multiples of T x P x C.
  plan::ParallelSizes parallel;
  // A model-parallel job's model: one spec per slot (tp, pp), indexed by
  // plan::SlotIndex (tp + T x pp), from model.slots or a model.preset split
  // by plan::PresetParallelModel. Empty otherwise.
  std::vector<plan::ModelSpec> slots;
  // bucket_size 0 (the default) means max(40,000,000, 1,000,000 * max
  // world); layout.max_world is set to world.max.
  plan::LayoutOptions layout;
  OptimizerSpec optimizer;
  WorldSpec world;
  int64_t lease_timeout_ms = 5000;
  int64_t heartbeat_interval_ms = 1000;  // below lease_timeout_ms
  // A transition phase (PREPARED acks of a proposal, ACTIVE acks of a
  // committed epoch) waiting longer than this is given up with an event
  // naming who did not answer, and the coordinator proposes again. At least
  // one lease.
  int64_t transition_timeout_ms = DefaultTransitionTimeoutMs(lease_timeout_ms);
  // Membership changes (joins, leaves, deaths, drains) that arrive within
  // this long of each other are gathered into one proposal: the coordinator
  // proposes once no change came for this long, or 10 times this long after
  // the first change still waiting, whichever is first; a change that
  // alters the world of a proposal in flight supersedes it. 0: propose at
  // each change. At most half a lease.
  int64_t transition_settle_ms = DefaultTransitionSettleMs(lease_timeout_ms);
  // When more than this fraction of the live members (at least 3 live) are
  // past their lease at once, the coordinator judges itself cut off rather
  // than them dead: it declares no one dead, records an `isolated` event
  // and waits. 1: never.
  double isolation_fraction = 0.5;
  // A member excluded for a broken link to a peer is not placed in a world
  // with that peer again for this long.
  int64_t link_quarantine_ms = 600000;
  WorkloadSpec workload;
  CheckpointSpec checkpoint;
};

// Parses and validates a job spec from JSON text. InvalidArgument with one
// line naming the field on any problem (wrong type or range, min > max,
// instances not dividing max, unknown preset or workload, unknown field, a
// model the workload cannot run: see CheckWorkloadModel; for a
// model-parallel job: a slot missing, duplicated or out of range, slots
// without parallel or parallel without slots, world.max or world.min not a
// multiple of T x P x C, instances not dividing R x C at world.max).
absl::StatusOr<JobSpec> ParseJobSpec(absl::string_view json_text);
// The same from an already parsed value.
absl::StatusOr<JobSpec> JobSpecFromJson(const nlohmann::json& j);
// Whether the job has its model (params, or slots): a job of workload
// 'trainer' may leave it out and take its first trainer's (the coordinator
// then fills it in).
bool HasModel(const JobSpec& spec);
// Serialises to the JSON form ParseJobSpec reads (a preset stays a preset,
// a model not yet known is left out).
std::string JobSpecToJson(const JobSpec& spec);

// Plan options for a world of `world` ranks under this job: its instance
// count from the resize policy (InstancesOf), bucket size fixed by the
// job's max world. The coordinator and every worker derive plans here.
plan::PlanOptions JobPlanOptions(const JobSpec& spec, int world);

// The job's model as slots: a model-parallel job's slots, or one slot
// holding spec.model. Requires HasModel(spec).
plan::ParallelModel JobParallelModel(const JobSpec& spec);

// The world spec of every slot's data-parallel domain: world.min and
// world.max divided by T x P (the slots), instances and resize as the
// job's. The job's own world without model parallelism.
WorldSpec SlotWorld(const JobSpec& spec);

// Model-parallel plan options for a world of `world` workers: the instance
// count of its data-parallel size R x C = world / (T x P) under the resize
// policy (keep_i: world.instances; keep_d: R x C / D with D = (R x C at
// world.max) / world.instances; 0 when D does not divide it), and the
// layout with max_world = R x C at world.max, which fixes the default
// bucket size. With T = P = C = 1 it matches JobPlanOptions.
plan::ParallelPlanOptions JobParallelPlanOptions(const JobSpec& spec,
                                                 int world);

}  // namespace zshard::job
