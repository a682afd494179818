// Job spec parsing, validation and serialisation.
#include "common/job/job_spec.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/job/json_fields.h"
#include "common/job/workload_kind.h"
#include "common/job/workload_model.h"
#include "common/plan/presets.h"
#include "common/status.h"
#include "nlohmann/json.hpp"

namespace zshard::job {
namespace {

constexpr int64_t kMaxWorld = 65536;
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

absl::Status CheckJobName(const std::string& name) {
  if (name.empty()) return absl::InvalidArgumentError("name is missing");
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    if (!ok) {
      return absl::InvalidArgumentError(
          "name may hold only letters, digits, '.', '_' and '-'");
    }
  }
  return absl::OkStatus();
}

absl::Status ParseModel(const nlohmann::json& j, JobSpec& spec) {
  if (!j.is_object()) {
    return absl::InvalidArgumentError("model must be an object");
  }
  bool has_preset = j.contains("preset");
  if (has_preset == j.contains("params")) {
    return absl::InvalidArgumentError(
        "model must have exactly one of 'preset' and 'params'");
  }
  if (has_preset) {
    ZSHARD_ASSIGN_OR_RETURN(JsonFields f, JsonFields::Open(j, "model"));
    ZSHARD_ASSIGN_OR_RETURN(spec.model_preset, f.String("preset", "", 128));
    ZSHARD_RETURN_IF_ERROR(f.CheckNoUnknown());
    auto model = plan::PresetModel(spec.model_preset);
    if (!model.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model.preset '", spec.model_preset,
          "' is unknown; known: ", absl::StrJoin(plan::PresetNames(), ", ")));
    }
    spec.model = *std::move(model);
    return absl::OkStatus();
  }
  auto model = plan::ModelSpecFromJson(j);
  if (!model.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("model: ", model.status().message()));
  }
  spec.model = *std::move(model);
  return absl::OkStatus();
}

absl::Status ParseLayout(const nlohmann::json& j, JobSpec& spec) {
  ZSHARD_ASSIGN_OR_RETURN(JsonFields f, JsonFields::Open(j, "layout"));
  plan::LayoutOptions& l = spec.layout;
  ZSHARD_ASSIGN_OR_RETURN(l.bucket_size,
                          f.Int("bucket_size", 0, 0, int64_t{1} << 40));
  ZSHARD_ASSIGN_OR_RETURN(l.grad_reduce_in_fp32,
                          f.Bool("grad_reduce_in_fp32", false));
  ZSHARD_ASSIGN_OR_RETURN(l.pad_for_high_nccl_busbw,
                          f.Bool("pad_for_high_nccl_busbw", false));
  ZSHARD_ASSIGN_OR_RETURN(int64_t ep,
                          f.Int("expert_parallel", 1, 1, kMaxWorld));
  l.expert_parallel = static_cast<int>(ep);
  return f.CheckNoUnknown();
}

absl::Status ParseLrSchedule(const nlohmann::json& j, OptimizerSpec& o) {
  ZSHARD_ASSIGN_OR_RETURN(JsonFields f,
                          JsonFields::Open(j, "optimizer.lr_schedule"));
  LrSchedule& s = o.lr_schedule;
  ZSHARD_ASSIGN_OR_RETURN(const std::string kind,
                          f.String("kind", "constant", 16));
  ZSHARD_ASSIGN_OR_RETURN(s.kind, ParseLrScheduleKind(kind));
  constexpr int64_t kMaxSteps = int64_t{1} << 50;
  ZSHARD_ASSIGN_OR_RETURN(s.warmup_steps,
                          f.Int("warmup_steps", 0, 0, kMaxSteps));
  ZSHARD_ASSIGN_OR_RETURN(s.decay_steps, f.Int("decay_steps", 0, 0, kMaxSteps));
  ZSHARD_ASSIGN_OR_RETURN(s.min_lr, f.Double("min_lr", 0.0, 0.0, 1e30));
  ZSHARD_RETURN_IF_ERROR(f.CheckNoUnknown());
  return ValidateLrSchedule(s, o.lr);
}

absl::Status ParseOptimizer(const nlohmann::json& j, OptimizerSpec& o) {
  ZSHARD_ASSIGN_OR_RETURN(JsonFields f, JsonFields::Open(j, "optimizer"));
  constexpr double kBig = 1e30;
  ZSHARD_ASSIGN_OR_RETURN(o.lr, f.Double("lr", 0.001, 0.0, kBig));
  ZSHARD_ASSIGN_OR_RETURN(o.beta1, f.Double("beta1", 0.9, 0.0, 0.999999999));
  ZSHARD_ASSIGN_OR_RETURN(o.beta2, f.Double("beta2", 0.999, 0.0, 0.999999999));
  ZSHARD_ASSIGN_OR_RETURN(o.eps, f.Double("eps", 1e-8, 0.0, kBig));
  ZSHARD_ASSIGN_OR_RETURN(o.weight_decay,
                          f.Double("weight_decay", 0.0, 0.0, kBig));
  ZSHARD_ASSIGN_OR_RETURN(o.clip_grad_norm,
                          f.Double("clip_grad_norm", 0.0, 0.0, kBig));
  if (o.lr <= 0.0)
    return absl::InvalidArgumentError("optimizer.lr must be > 0");
  if (o.eps <= 0.0) {
    return absl::InvalidArgumentError("optimizer.eps must be > 0");
  }
  ZSHARD_ASSIGN_OR_RETURN(const nlohmann::json* schedule,
                          f.Object("lr_schedule"));
  ZSHARD_RETURN_IF_ERROR(f.CheckNoUnknown());
  return ParseLrSchedule(*schedule, o);
}

absl::Status ParseWorld(const nlohmann::json& j, WorldSpec& w) {
  ZSHARD_ASSIGN_OR_RETURN(JsonFields f, JsonFields::Open(j, "world"));
  ZSHARD_ASSIGN_OR_RETURN(int64_t instances,
                          f.Int("instances", 2, 1, kMaxWorld));
  ZSHARD_ASSIGN_OR_RETURN(int64_t min, f.Int("min", 2, 1, kMaxWorld));
  ZSHARD_ASSIGN_OR_RETURN(int64_t max, f.Int("max", 4, 1, kMaxWorld));
  const ResizePolicy fallback =
      DefaultResizePolicy(static_cast<int>(instances));
  ZSHARD_ASSIGN_OR_RETURN(std::string resize,
                          f.String("resize", ResizePolicyName(fallback), 16));
  ZSHARD_RETURN_IF_ERROR(f.CheckNoUnknown());
  if (resize == "keep_d") {
    w.resize = ResizePolicy::kKeepD;
  } else if (resize == "keep_i") {
    w.resize = ResizePolicy::kKeepI;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "world.resize '", resize, "' is unknown; known: keep_d, keep_i"));
  }
  if (min > max) {
    return absl::InvalidArgumentError(absl::StrCat(
        "world.min (", min, ") is greater than world.max (", max, ")"));
  }
  if (max % instances != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("world.instances (", instances,
                     ") does not divide world.max (", max, ")"));
  }
  w.instances = static_cast<int>(instances);
  w.min = static_cast<int>(min);
  w.max = static_cast<int>(max);
  return absl::OkStatus();
}

absl::Status ParseWorkload(const nlohmann::json& j, WorkloadSpec& w) {
  ZSHARD_ASSIGN_OR_RETURN(JsonFields f, JsonFields::Open(j, "workload"));
  ZSHARD_ASSIGN_OR_RETURN(std::string kind, f.String("kind", "idle", 64));
  ZSHARD_ASSIGN_OR_RETURN(w.kind, ParseWorkloadKind(kind));
  ZSHARD_ASSIGN_OR_RETURN(w.steps, f.Int("steps", 0, 0, kInt64Max / 2));
  ZSHARD_ASSIGN_OR_RETURN(w.global_batch,
                          f.Int("global_batch", 64, 1, int64_t{1} << 30));
  ZSHARD_ASSIGN_OR_RETURN(w.step_delay_ms,
                          f.Int("step_delay_ms", 100, 0, 3600000));
  ZSHARD_ASSIGN_OR_RETURN(w.trainer_timeout_ms,
                          f.Int("trainer_timeout_ms", 20000, 1000, 86400000));
  return f.CheckNoUnknown();
}

absl::Status ParseCheckpoint(const nlohmann::json& j, CheckpointSpec& c) {
  ZSHARD_ASSIGN_OR_RETURN(JsonFields f, JsonFields::Open(j, "checkpoint"));
  ZSHARD_ASSIGN_OR_RETURN(c.dir, f.String("dir", "", 4096));
  ZSHARD_ASSIGN_OR_RETURN(c.every_steps,
                          f.Int("every_steps", 0, 0, kInt64Max / 2));
  ZSHARD_RETURN_IF_ERROR(f.CheckNoUnknown());
  if (c.every_steps > 0 && c.dir.empty()) {
    return absl::InvalidArgumentError(
        "checkpoint.every_steps > 0 needs checkpoint.dir");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<WorkloadKind> ParseWorkloadKind(const std::string& kind) {
  if (kind == "idle") return WorkloadKind::kIdle;
  if (kind == "synthetic") return WorkloadKind::kSynthetic;
  if (kind == "regression") return WorkloadKind::kRegression;
  if (kind == "trainer") return WorkloadKind::kTrainer;
  return absl::InvalidArgumentError(
      absl::StrCat("workload.kind '", kind,
                   "' is unknown; known: idle, synthetic, "
                   "regression, trainer"));
}

const char* WorkloadKindName(WorkloadKind kind) {
  switch (kind) {
    case WorkloadKind::kIdle:
      return "idle";
    case WorkloadKind::kSynthetic:
      return "synthetic";
    case WorkloadKind::kRegression:
      return "regression";
    case WorkloadKind::kTrainer:
      return "trainer";
  }
  return "idle";
}

absl::StatusOr<JobSpec> JobSpecFromJson(const nlohmann::json& j) {
  JobSpec spec;
  ZSHARD_ASSIGN_OR_RETURN(JsonFields f, JsonFields::Open(j, ""));
  ZSHARD_ASSIGN_OR_RETURN(spec.name, f.String("name", "", 128));
  ZSHARD_RETURN_IF_ERROR(CheckJobName(spec.name));
  f.Object("model").IgnoreError();  // marks the key; parsed below
  if (!f.Has("model")) return absl::InvalidArgumentError("model is missing");
  ZSHARD_RETURN_IF_ERROR(ParseModel(j["model"], spec));
  ZSHARD_ASSIGN_OR_RETURN(const nlohmann::json* layout, f.Object("layout"));
  ZSHARD_RETURN_IF_ERROR(ParseLayout(*layout, spec));
  ZSHARD_ASSIGN_OR_RETURN(const nlohmann::json* opt, f.Object("optimizer"));
  ZSHARD_RETURN_IF_ERROR(ParseOptimizer(*opt, spec.optimizer));
  ZSHARD_ASSIGN_OR_RETURN(const nlohmann::json* world, f.Object("world"));
  ZSHARD_RETURN_IF_ERROR(ParseWorld(*world, spec.world));
  ZSHARD_ASSIGN_OR_RETURN(spec.lease_timeout_ms,
                          f.Int("lease_timeout_ms", 5000, 100, 3600000));
  ZSHARD_ASSIGN_OR_RETURN(
      spec.heartbeat_interval_ms,
      f.Int("heartbeat_interval_ms", 1000, 10, spec.lease_timeout_ms - 1));
  ZSHARD_ASSIGN_OR_RETURN(
      spec.transition_timeout_ms,
      f.Int("transition_timeout_ms", 4 * spec.lease_timeout_ms,
            spec.lease_timeout_ms, 86400000));
  ZSHARD_ASSIGN_OR_RETURN(
      spec.transition_settle_ms,
      f.Int("transition_settle_ms",
            std::min<int64_t>(300, spec.lease_timeout_ms / 2), 0,
            spec.lease_timeout_ms / 2));
  ZSHARD_ASSIGN_OR_RETURN(const nlohmann::json* wl, f.Object("workload"));
  ZSHARD_RETURN_IF_ERROR(ParseWorkload(*wl, spec.workload));
  ZSHARD_ASSIGN_OR_RETURN(const nlohmann::json* ck, f.Object("checkpoint"));
  ZSHARD_RETURN_IF_ERROR(ParseCheckpoint(*ck, spec.checkpoint));
  ZSHARD_RETURN_IF_ERROR(f.CheckNoUnknown());
  ZSHARD_RETURN_IF_ERROR(CheckWorkloadModel(spec.workload.kind, spec.model));

  int max_d = spec.world.max / spec.world.instances;
  if (max_d % spec.layout.expert_parallel != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "layout.expert_parallel (", spec.layout.expert_parallel,
        ") does not divide world.max / world.instances (", max_d, ")"));
  }
  spec.layout.max_world = spec.world.max;
  return spec;
}

absl::StatusOr<JobSpec> ParseJobSpec(absl::string_view json_text) {
  nlohmann::json j = nlohmann::json::parse(json_text.begin(), json_text.end(),
                                           nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return absl::InvalidArgumentError("job spec is not valid json");
  }
  return JobSpecFromJson(j);
}

std::string JobSpecToJson(const JobSpec& spec) {
  nlohmann::json j;
  j["name"] = spec.name;
  if (!spec.model_preset.empty()) {
    j["model"] = {{"preset", spec.model_preset}};
  } else {
    j["model"] = nlohmann::json::parse(plan::ModelSpecToJson(spec.model),
                                       nullptr, false);
  }
  const plan::LayoutOptions& l = spec.layout;
  j["layout"] = {{"bucket_size", l.bucket_size},
                 {"grad_reduce_in_fp32", l.grad_reduce_in_fp32},
                 {"pad_for_high_nccl_busbw", l.pad_for_high_nccl_busbw},
                 {"expert_parallel", l.expert_parallel}};
  const OptimizerSpec& o = spec.optimizer;
  j["optimizer"] = {{"lr", o.lr},
                    {"beta1", o.beta1},
                    {"beta2", o.beta2},
                    {"eps", o.eps},
                    {"weight_decay", o.weight_decay},
                    {"clip_grad_norm", o.clip_grad_norm}};
  // Absent when constant without warmup, so that older job files keep
  // their serialisation (and hash).
  const LrSchedule& ls = o.lr_schedule;
  if (ls.kind != LrScheduleKind::kConstant || ls.warmup_steps != 0) {
    j["optimizer"]["lr_schedule"] = {{"kind", LrScheduleKindName(ls.kind)},
                                     {"warmup_steps", ls.warmup_steps},
                                     {"decay_steps", ls.decay_steps},
                                     {"min_lr", ls.min_lr}};
  }
  j["world"] = {{"instances", spec.world.instances},
                {"min", spec.world.min},
                {"max", spec.world.max}};
  // Absent at its default, so that older job files keep their hash.
  if (spec.world.resize != DefaultResizePolicy(spec.world.instances)) {
    j["world"]["resize"] = ResizePolicyName(spec.world.resize);
  }
  j["lease_timeout_ms"] = spec.lease_timeout_ms;
  j["heartbeat_interval_ms"] = spec.heartbeat_interval_ms;
  j["transition_timeout_ms"] = spec.transition_timeout_ms;
  j["transition_settle_ms"] = spec.transition_settle_ms;
  j["workload"] = {{"kind", WorkloadKindName(spec.workload.kind)},
                   {"steps", spec.workload.steps},
                   {"global_batch", spec.workload.global_batch},
                   {"step_delay_ms", spec.workload.step_delay_ms}};
  // Absent at its default, so that older job files keep their hash.
  if (spec.workload.kind == WorkloadKind::kTrainer ||
      spec.workload.trainer_timeout_ms != 20000) {
    j["workload"]["trainer_timeout_ms"] = spec.workload.trainer_timeout_ms;
  }
  j["checkpoint"] = {{"dir", spec.checkpoint.dir},
                     {"every_steps", spec.checkpoint.every_steps}};
  return j.dump();
}

const char* ResizePolicyName(ResizePolicy policy) {
  return policy == ResizePolicy::kKeepD ? "keep_d" : "keep_i";
}

ResizePolicy DefaultResizePolicy(int instances) {
  return instances >= 2 ? ResizePolicy::kKeepD : ResizePolicy::kKeepI;
}

int WorldStep(const WorldSpec& world) {
  if (world.resize == ResizePolicy::kKeepI || world.instances <= 0) {
    return world.instances;
  }
  return world.max / world.instances;
}

int InstancesOf(const WorldSpec& world, int w) {
  if (world.resize == ResizePolicy::kKeepI) return world.instances;
  const int d = WorldStep(world);
  return d > 0 && w % d == 0 ? w / d : 0;
}

plan::PlanOptions JobPlanOptions(const JobSpec& spec, int world) {
  plan::PlanOptions options;
  options.world = world;
  options.instances = InstancesOf(spec.world, world);
  options.layout = spec.layout;
  options.layout.max_world = spec.world.max;
  return options;
}

}  // namespace zshard::job
