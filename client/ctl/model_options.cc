// Model and world options of zshardctl plan and ledger: a model file, a
// preset (split per slot with --tensor/--pipeline), or a job file.
#include "client/ctl/model_options.h"

#include <cstdio>
#include <limits>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "client/ctl/shared_flags.h"
#include "common/file_io.h"
#include "common/job/job_spec.h"
#include "common/plan/parallel.h"
#include "common/plan/preset_slots.h"
#include "common/plan/presets.h"
#include "common/status.h"

ABSL_FLAG(std::string, model, "", "the model spec file (JSON)");
ABSL_FLAG(std::string, preset, "", "a preset model, e.g. gpt2-small");
ABSL_FLAG(int64_t, world, 0,
          "ranks (workers) in the job; required, or with --job its world.max "
          "by default");
ABSL_FLAG(int64_t, instances, 1, "model instances (data-parallel groups)");
ABSL_FLAG(int64_t, tensor, 1, "tensor-parallel size T");
ABSL_FLAG(int64_t, pipeline, 1, "pipeline-parallel size P");
ABSL_FLAG(int64_t, context, 1, "context-parallel size C");
ABSL_FLAG(int64_t, bucket_size, 0, "elements per bucket (default: planner's)");
ABSL_FLAG(int64_t, max_world, 0,
          "largest world the layout must allow (default: the planner's)");
ABSL_FLAG(int64_t, expert_parallel, 1, "expert-parallel degree");
ABSL_FLAG(bool, grad_reduce_in_fp32, false, "reduce gradients in fp32");
ABSL_FLAG(bool, pad_for_high_nccl_busbw, false,
          "pad buckets for NCCL's best bus bandwidth");

namespace zshard::ctl {
namespace {

constexpr int64_t kMaxInt = std::numeric_limits<int>::max();
constexpr int64_t kMaxInt64 = std::numeric_limits<int64_t>::max();

// A model file's spec, its errors naming the file.
absl::StatusOr<plan::ModelSpec> ReadModelFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) {
    return absl::Status(text.status().code(),
                        absl::StrCat("model ", text.status().message()));
  }
  absl::StatusOr<plan::ModelSpec> spec = plan::ParseModelSpec(*text);
  if (!spec.ok()) {
    return absl::Status(
        spec.status().code(),
        absl::StrCat("'", path, "': ", spec.status().message()));
  }
  return spec;
}

// The layout and instance flags given on the command line, over `layout`
// and `instances` (the defaults, or a job's values).
absl::Status ApplyLayoutFlags(const ParsedCommandLine& parsed,
                              plan::LayoutOptions& layout, int& instances) {
  // In the order these checks have always run.
  ZSHARD_RETURN_IF_ERROR(CheckRange(FLAGS_instances, 1, kMaxInt));
  if (parsed.Given(FLAGS_bucket_size)) {
    ZSHARD_RETURN_IF_ERROR(CheckRange(FLAGS_bucket_size, 1, kMaxInt64));
    layout.bucket_size = absl::GetFlag(FLAGS_bucket_size);
  }
  if (parsed.Given(FLAGS_max_world)) {
    ZSHARD_RETURN_IF_ERROR(CheckRange(FLAGS_max_world, 1, kMaxInt));
    layout.max_world = static_cast<int>(absl::GetFlag(FLAGS_max_world));
  }
  ZSHARD_RETURN_IF_ERROR(CheckRange(FLAGS_expert_parallel, 1, kMaxInt));
  if (parsed.Given(FLAGS_instances)) {
    instances = static_cast<int>(absl::GetFlag(FLAGS_instances));
  }
  if (parsed.Given(FLAGS_expert_parallel)) {
    layout.expert_parallel =
        static_cast<int>(absl::GetFlag(FLAGS_expert_parallel));
  }
  if (parsed.Given(FLAGS_grad_reduce_in_fp32)) {
    layout.grad_reduce_in_fp32 = absl::GetFlag(FLAGS_grad_reduce_in_fp32);
  }
  if (parsed.Given(FLAGS_pad_for_high_nccl_busbw)) {
    layout.pad_for_high_nccl_busbw =
        absl::GetFlag(FLAGS_pad_for_high_nccl_busbw);
  }
  return absl::OkStatus();
}

// --max-world M counts workers; a model-parallel layout's max_world is the
// data-parallel size R x C at M (parallel_plan.h).
absl::Status ToDataParallelMaxWorld(const ParsedCommandLine& parsed,
                                    const plan::ParallelSizes& sizes,
                                    plan::LayoutOptions& layout) {
  if (!parsed.Given(FLAGS_max_world)) return absl::OkStatus();
  if (layout.max_world % sizes.replica_size() != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-world (", layout.max_world,
                     ") is not a multiple of tensor x pipeline x context (",
                     sizes.replica_size(), ")"));
  }
  layout.max_world = layout.max_world / sizes.slots();
  return absl::OkStatus();
}

// The model and options of --job FILE.
absl::Status ReadJob(const ParsedCommandLine& parsed, ModelOptions& o) {
  for (const auto* flag : {&FLAGS_tensor, &FLAGS_pipeline, &FLAGS_context}) {
    if (parsed.Given(*flag)) {
      return absl::InvalidArgumentError(
          absl::StrCat(FlagName(*flag),
                       " comes from the job file's parallel; leave it out "
                       "with --job"));
    }
  }
  const std::string path = absl::GetFlag(FLAGS_job);
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) {
    return absl::Status(text.status().code(),
                        absl::StrCat("job ", text.status().message()));
  }
  absl::StatusOr<job::JobSpec> spec = job::ParseJobSpec(*text);
  if (!spec.ok()) {
    return absl::Status(
        spec.status().code(),
        absl::StrCat("'", path, "': ", spec.status().message()));
  }
  if (!job::HasModel(*spec)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", path, "' has no model (a trainer job that takes its trainer's)"));
  }
  int world = spec->world.max;
  if (parsed.Given(FLAGS_world)) {
    ZSHARD_RETURN_IF_ERROR(CheckRange(FLAGS_world, 1, kMaxInt));
    world = static_cast<int>(absl::GetFlag(FLAGS_world));
  }
  o.model_parallel = spec->parallel.model_parallel();
  if (!o.model_parallel) {
    o.model = spec->model;
    o.plan = job::JobPlanOptions(*spec, world);
    return ApplyLayoutFlags(parsed, o.plan.layout, o.plan.instances);
  }
  ZSHARD_RETURN_IF_ERROR(plan::CheckParallelWorld(spec->parallel, world));
  o.name = spec->name;
  o.parallel = job::JobParallelModel(*spec);
  o.parallel_plan = job::JobParallelPlanOptions(*spec, world);
  ZSHARD_RETURN_IF_ERROR(ApplyLayoutFlags(parsed, o.parallel_plan.layout,
                                          o.parallel_plan.instances));
  ZSHARD_RETURN_IF_ERROR(
      ToDataParallelMaxWorld(parsed, spec->parallel, o.parallel_plan.layout));
  if (o.parallel_plan.instances == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("world ", world,
                     " holds no whole instance of the job's shard group "
                     "(world.resize keep_d); give --world or --instances"));
  }
  return absl::OkStatus();
}

// The model-parallel model of --preset or --model split by --tensor,
// --pipeline and --context.
absl::StatusOr<plan::ParallelModel> SplitModel(
    const ParsedCommandLine& parsed, const plan::ParallelSizes& sizes) {
  if (parsed.Given(FLAGS_preset)) {
    return plan::PresetParallelModel(absl::GetFlag(FLAGS_preset), sizes);
  }
  if (sizes.slots() > 1) {
    return absl::InvalidArgumentError(
        "a model file holds one slot: --tensor or --pipeline above 1 needs "
        "--job FILE with model.slots, or a llama --preset");
  }
  plan::ParallelModel model;
  model.sizes = sizes;
  ZSHARD_ASSIGN_OR_RETURN(plan::ModelSpec spec,
                          ReadModelFile(absl::GetFlag(FLAGS_model)));
  model.slots.push_back(std::move(spec));
  return model;
}

}  // namespace

FlagList ModelFlagList() {
  return {FlagOf(FLAGS_model),
          FlagOf(FLAGS_preset),
          FlagOf(FLAGS_job),
          FlagOf(FLAGS_world),
          FlagOf(FLAGS_instances),
          FlagOf(FLAGS_tensor),
          FlagOf(FLAGS_pipeline),
          FlagOf(FLAGS_context),
          FlagOf(FLAGS_bucket_size),
          FlagOf(FLAGS_max_world),
          FlagOf(FLAGS_expert_parallel),
          FlagOf(FLAGS_grad_reduce_in_fp32),
          FlagOf(FLAGS_pad_for_high_nccl_busbw),
          FlagOf(FLAGS_output)};
}

bool ModelGiven(const ParsedCommandLine& parsed) {
  return parsed.Given(FLAGS_model) || parsed.Given(FLAGS_preset) ||
         parsed.Given(FLAGS_job);
}

absl::StatusOr<ModelOptions> ReadModelOptions(const ParsedCommandLine& parsed) {
  ModelOptions o;
  const std::string output = absl::GetFlag(FLAGS_output);
  if (output == "table") {
    o.output = OutputFormat::kTable;
  } else if (output == "json") {
    o.output = OutputFormat::kJson;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "--output must be table or json (got '", output.substr(0, 40), "')"));
  }
  const bool file = parsed.Given(FLAGS_model);
  const bool preset = parsed.Given(FLAGS_preset);
  if (parsed.Given(FLAGS_job)) {
    if (file || preset) {
      return absl::InvalidArgumentError(
          "give --job alone, not with --model or --preset");
    }
    ZSHARD_RETURN_IF_ERROR(ReadJob(parsed, o));
    return o;
  }
  if (!parsed.Given(FLAGS_world)) {
    return absl::InvalidArgumentError("--world W is required");
  }
  ZSHARD_RETURN_IF_ERROR(CheckRange(FLAGS_world, 1, kMaxInt));
  ZSHARD_RETURN_IF_ERROR(CheckRange(FLAGS_tensor, 1, kMaxInt));
  ZSHARD_RETURN_IF_ERROR(CheckRange(FLAGS_pipeline, 1, kMaxInt));
  ZSHARD_RETURN_IF_ERROR(CheckRange(FLAGS_context, 1, kMaxInt));
  if (file && preset) {
    return absl::InvalidArgumentError(
        "give either --model or --preset, not both");
  }
  if (!file && !preset) {
    return absl::InvalidArgumentError(
        "--model FILE or --preset NAME is required (or --job FILE)");
  }
  const int world = static_cast<int>(absl::GetFlag(FLAGS_world));
  plan::ParallelSizes sizes;
  sizes.tensor = static_cast<int>(absl::GetFlag(FLAGS_tensor));
  sizes.pipeline = static_cast<int>(absl::GetFlag(FLAGS_pipeline));
  sizes.context = static_cast<int>(absl::GetFlag(FLAGS_context));
  o.model_parallel = sizes.model_parallel();
  if (!o.model_parallel) {
    o.plan.world = world;
    ZSHARD_RETURN_IF_ERROR(
        ApplyLayoutFlags(parsed, o.plan.layout, o.plan.instances));
    if (preset) {
      ZSHARD_ASSIGN_OR_RETURN(o.model,
                              plan::PresetModel(absl::GetFlag(FLAGS_preset)));
    } else {
      ZSHARD_ASSIGN_OR_RETURN(o.model,
                              ReadModelFile(absl::GetFlag(FLAGS_model)));
    }
    return o;
  }
  // The sizes against the world first: that line names the world, not a
  // slot's split.
  if (int64_t{sizes.tensor} * sizes.pipeline * sizes.context > kMaxInt) {
    return absl::InvalidArgumentError(
        "tensor x pipeline x context is too large");
  }
  ZSHARD_RETURN_IF_ERROR(plan::CheckParallelWorld(sizes, world));
  o.parallel_plan.world = world;
  ZSHARD_RETURN_IF_ERROR(ApplyLayoutFlags(parsed, o.parallel_plan.layout,
                                          o.parallel_plan.instances));
  ZSHARD_RETURN_IF_ERROR(
      ToDataParallelMaxWorld(parsed, sizes, o.parallel_plan.layout));
  ZSHARD_ASSIGN_OR_RETURN(o.parallel, SplitModel(parsed, sizes));
  o.name = preset ? absl::GetFlag(FLAGS_preset) : o.parallel.slots[0].name;
  return o;
}

int ReportError(const char* command, const absl::Status& status) {
  std::string message(status.message());
  for (char& c : message) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  std::fprintf(stderr, "zshardctl %s: %s\n", command, message.c_str());
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kOutOfRange:
      return 2;
    default:
      return 1;
  }
}

}  // namespace zshard::ctl
