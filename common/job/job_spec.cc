// Job spec parsing, validation and serialisation.
#include "common/job/job_spec.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/job/job_parallel.h"
#include "common/job/job_spec_fields.h"
#include "common/job/json_fields.h"
#include "common/job/workload_kind.h"
#include "common/job/workload_model.h"
#include "common/plan/presets.h"
#include "common/status.h"
#include "nlohmann/json.hpp"

namespace zshard::job {
namespace {

// Each Parse function below reads one object of the spec: its scalar fields
// through the field table (job_spec_fields.h), in the table's order, then
// the checks that tie them together, in the order the errors are reported.

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
  const bool has_preset = j.contains("preset");
  const int forms = (has_preset ? 1 : 0) + (j.contains("params") ? 1 : 0) +
                    (j.contains("slots") ? 1 : 0);
  if (forms != 1) {
    return absl::InvalidArgumentError(
        "model must have exactly one of 'preset', 'params' and 'slots'");
  }
  if (j.contains("slots")) {
    for (const auto& item : j.items()) {
      if (item.key() != "slots") {
        return absl::InvalidArgumentError(
            absl::StrCat("unknown field model.", item.key()));
      }
    }
    return ParseModelSlots(j["slots"], spec);
  }
  if (has_preset) {
    ZSHARD_ASSIGN_OR_RETURN(JsonFields f, JsonFields::Open(j, "model"));
    ZSHARD_RETURN_IF_ERROR(ReadJobSpecFields(f, spec));
    ZSHARD_RETURN_IF_ERROR(f.CheckNoUnknown());
    auto model = plan::PresetModel(spec.model_preset);
    if (!model.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model.preset '", spec.model_preset,
          "' is unknown; known: ", absl::StrJoin(plan::PresetNames(), ", ")));
    }
    spec.model = *std::move(model);
    if (spec.parallel.model_parallel()) return SplitPresetSlots(spec);
    return absl::OkStatus();
  }
  if (spec.parallel.model_parallel()) {
    return absl::InvalidArgumentError(
        "parallel above 1 needs model.slots (one spec per slot) or a "
        "model.preset, not model.params");
  }
  auto model = plan::ModelSpecFromJson(j);
  if (!model.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("model: ", model.status().message()));
  }
  spec.model = *std::move(model);
  return absl::OkStatus();
}

absl::Status ParseParallel(const nlohmann::json& j, JobSpec& spec) {
  ZSHARD_ASSIGN_OR_RETURN(JsonFields f, JsonFields::Open(j, "parallel"));
  ZSHARD_RETURN_IF_ERROR(ReadJobSpecFields(f, spec));
  return f.CheckNoUnknown();
}

absl::Status ParseLayout(const nlohmann::json& j, JobSpec& spec) {
  ZSHARD_ASSIGN_OR_RETURN(JsonFields f, JsonFields::Open(j, "layout"));
  ZSHARD_RETURN_IF_ERROR(ReadJobSpecFields(f, spec));
  return f.CheckNoUnknown();
}

absl::Status ParseLrSchedule(const nlohmann::json& j, JobSpec& spec) {
  ZSHARD_ASSIGN_OR_RETURN(JsonFields f,
                          JsonFields::Open(j, "optimizer.lr_schedule"));
  ZSHARD_RETURN_IF_ERROR(ReadJobSpecFields(f, spec));
  ZSHARD_RETURN_IF_ERROR(f.CheckNoUnknown());
  return ValidateLrSchedule(spec.optimizer.lr_schedule, spec.optimizer.lr);
}

absl::Status ParseOptimizer(const nlohmann::json& j, JobSpec& spec) {
  ZSHARD_ASSIGN_OR_RETURN(JsonFields f, JsonFields::Open(j, "optimizer"));
  ZSHARD_RETURN_IF_ERROR(ReadJobSpecFields(f, spec));
  ZSHARD_ASSIGN_OR_RETURN(const nlohmann::json* schedule,
                          f.Object("lr_schedule"));
  ZSHARD_RETURN_IF_ERROR(f.CheckNoUnknown());
  return ParseLrSchedule(*schedule, spec);
}

absl::Status ParseWorld(const nlohmann::json& j, JobSpec& spec) {
  ZSHARD_ASSIGN_OR_RETURN(JsonFields f, JsonFields::Open(j, "world"));
  ZSHARD_RETURN_IF_ERROR(ReadJobSpecFields(f, spec, /*through=*/"max"));
  // world.resize's name is checked after the unknown keys, as it always
  // has been, so a spec with both problems names the same one.
  const JobSpecField& resize = *FindJobSpecField("world.resize");
  ZSHARD_ASSIGN_OR_RETURN(const nlohmann::json name,
                          ReadJobSpecField(f, resize, spec));
  ZSHARD_RETURN_IF_ERROR(f.CheckNoUnknown());
  ZSHARD_RETURN_IF_ERROR(resize.set(spec, name));
  const WorldSpec& w = spec.world;
  if (w.min > w.max) {
    return absl::InvalidArgumentError(absl::StrCat(
        "world.min (", w.min, ") is greater than world.max (", w.max, ")"));
  }
  if (w.max % w.instances != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("world.instances (", w.instances,
                     ") does not divide world.max (", w.max, ")"));
  }
  return absl::OkStatus();
}

absl::Status ParseWorkload(const nlohmann::json& j, JobSpec& spec) {
  ZSHARD_ASSIGN_OR_RETURN(JsonFields f, JsonFields::Open(j, "workload"));
  ZSHARD_RETURN_IF_ERROR(ReadJobSpecFields(f, spec));
  return f.CheckNoUnknown();
}

absl::Status ParseCheckpoint(const nlohmann::json& j, JobSpec& spec) {
  ZSHARD_ASSIGN_OR_RETURN(JsonFields f, JsonFields::Open(j, "checkpoint"));
  ZSHARD_RETURN_IF_ERROR(ReadJobSpecFields(f, spec));
  ZSHARD_RETURN_IF_ERROR(f.CheckNoUnknown());
  const CheckpointSpec& c = spec.checkpoint;
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
  ZSHARD_RETURN_IF_ERROR(ReadJobSpecFields(f, spec, /*through=*/"name"));
  ZSHARD_RETURN_IF_ERROR(CheckJobName(spec.name));
  // parallel before the model: it says how the model is given.
  ZSHARD_ASSIGN_OR_RETURN(const nlohmann::json* parallel, f.Object("parallel"));
  ZSHARD_RETURN_IF_ERROR(ParseParallel(*parallel, spec));
  f.Object("model").IgnoreError();  // marks the key; parsed below
  const bool has_model = f.Has("model");
  if (has_model) ZSHARD_RETURN_IF_ERROR(ParseModel(j["model"], spec));
  ZSHARD_ASSIGN_OR_RETURN(const nlohmann::json* layout, f.Object("layout"));
  ZSHARD_RETURN_IF_ERROR(ParseLayout(*layout, spec));
  ZSHARD_ASSIGN_OR_RETURN(const nlohmann::json* opt, f.Object("optimizer"));
  ZSHARD_RETURN_IF_ERROR(ParseOptimizer(*opt, spec));
  ZSHARD_ASSIGN_OR_RETURN(const nlohmann::json* world, f.Object("world"));
  ZSHARD_RETURN_IF_ERROR(ParseWorld(*world, spec));
  ZSHARD_RETURN_IF_ERROR(CheckParallelJobWorld(spec));
  // The lease fields: the heartbeat and the transition fields take their
  // ranges and defaults from lease_timeout_ms (see their rows).
  ZSHARD_RETURN_IF_ERROR(ReadJobSpecFields(f, spec));
  ZSHARD_ASSIGN_OR_RETURN(const nlohmann::json* wl, f.Object("workload"));
  ZSHARD_RETURN_IF_ERROR(ParseWorkload(*wl, spec));
  ZSHARD_ASSIGN_OR_RETURN(const nlohmann::json* ck, f.Object("checkpoint"));
  ZSHARD_RETURN_IF_ERROR(ParseCheckpoint(*ck, spec));
  ZSHARD_RETURN_IF_ERROR(f.CheckNoUnknown());
  if (!has_model && spec.workload.kind != WorkloadKind::kTrainer) {
    return absl::InvalidArgumentError(
        "model is missing (only a job of workload 'trainer' may leave it "
        "out: it then takes its first trainer's model)");
  }
  if (!has_model && spec.parallel.model_parallel()) {
    return absl::InvalidArgumentError(
        "model is missing (a model-parallel job needs model.slots or a "
        "model.preset)");
  }
  if (has_model) {
    for (const plan::ModelSpec& model : JobParallelModel(spec).slots) {
      ZSHARD_RETURN_IF_ERROR(CheckWorkloadModel(spec.workload.kind, model));
    }
  }

  // D at world.max: of the data-parallel size R x C in a model-parallel
  // job (world.max when T = P = 1).
  int max_d = spec.world.max / spec.parallel.slots() / spec.world.instances;
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

bool HasModel(const JobSpec& spec) {
  return !spec.model.params.empty() || !spec.slots.empty();
}

std::string JobSpecToJson(const JobSpec& spec) {
  nlohmann::json j = nlohmann::json::object();
  // The scalar fields, less those left out at their defaults so that older
  // job files keep their serialisation (and hash): see the rows' omitted.
  WriteJobSpecFields(spec, j);
  if (spec.model_preset.empty() && !spec.slots.empty()) {
    j["model"] = ModelSlotsToJson(spec);
  } else if (spec.model_preset.empty() && HasModel(spec)) {
    j["model"] = nlohmann::json::parse(plan::ModelSpecToJson(spec.model),
                                       nullptr, false);
  }
  return j.dump();
}

const char* ResizePolicyName(ResizePolicy policy) {
  return policy == ResizePolicy::kKeepD ? "keep_d" : "keep_i";
}

absl::StatusOr<ResizePolicy> ParseResizePolicy(absl::string_view name) {
  if (name == "keep_d") return ResizePolicy::kKeepD;
  if (name == "keep_i") return ResizePolicy::kKeepI;
  return absl::InvalidArgumentError(absl::StrCat(
      "world.resize '", name, "' is unknown; known: keep_d, keep_i"));
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

plan::ParallelModel JobParallelModel(const JobSpec& spec) {
  plan::ParallelModel model;
  model.sizes = spec.parallel;
  if (spec.parallel.model_parallel()) {
    model.slots = spec.slots;
  } else {
    model.slots = {spec.model};
  }
  return model;
}

WorldSpec SlotWorld(const JobSpec& spec) {
  WorldSpec world = spec.world;
  world.min /= spec.parallel.slots();
  world.max /= spec.parallel.slots();
  return world;
}

plan::ParallelPlanOptions JobParallelPlanOptions(const JobSpec& spec,
                                                 int world) {
  const WorldSpec slot = SlotWorld(spec);
  plan::ParallelPlanOptions options;
  options.world = world;
  options.instances = InstancesOf(slot, world / spec.parallel.slots());
  options.layout = spec.layout;
  options.layout.max_world = slot.max;
  return options;
}

}  // namespace zshard::job
