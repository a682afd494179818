// Model and world options of zshardctl plan and ledger.
#include "client/ctl/model_options.h"

#include <cstdio>
#include <limits>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "client/ctl/shared_flags.h"
#include "common/file_io.h"
#include "common/plan/presets.h"
#include "common/status.h"

ABSL_FLAG(std::string, model, "", "the model spec file (JSON)");
ABSL_FLAG(std::string, preset, "", "a preset model, e.g. gpt2-small");
ABSL_FLAG(int64_t, world, 0, "ranks in the job; required");
ABSL_FLAG(int64_t, instances, 1, "model instances (data-parallel groups)");
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

absl::StatusOr<plan::ModelSpec> ReadModel(const ParsedCommandLine& parsed) {
  const bool file = parsed.Given(FLAGS_model);
  const bool preset = parsed.Given(FLAGS_preset);
  if (file && preset) {
    return absl::InvalidArgumentError(
        "give either --model or --preset, not both");
  }
  if (!file && !preset) {
    return absl::InvalidArgumentError(
        "--model FILE or --preset NAME is required");
  }
  if (preset) return plan::PresetModel(absl::GetFlag(FLAGS_preset));
  const std::string path = absl::GetFlag(FLAGS_model);
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

}  // namespace

FlagList ModelFlagList() {
  return {FlagOf(FLAGS_model),
          FlagOf(FLAGS_preset),
          FlagOf(FLAGS_world),
          FlagOf(FLAGS_instances),
          FlagOf(FLAGS_bucket_size),
          FlagOf(FLAGS_max_world),
          FlagOf(FLAGS_expert_parallel),
          FlagOf(FLAGS_grad_reduce_in_fp32),
          FlagOf(FLAGS_pad_for_high_nccl_busbw),
          FlagOf(FLAGS_output)};
}

bool ModelGiven(const ParsedCommandLine& parsed) {
  return parsed.Given(FLAGS_model) || parsed.Given(FLAGS_preset);
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
  if (!parsed.Given(FLAGS_world)) {
    return absl::InvalidArgumentError("--world W is required");
  }
  ZSHARD_RETURN_IF_ERROR(CheckRange(FLAGS_world, 1, kMaxInt));
  ZSHARD_RETURN_IF_ERROR(CheckRange(FLAGS_instances, 1, kMaxInt));
  // Absent, these keep the planner's defaults (0).
  if (parsed.Given(FLAGS_bucket_size)) {
    ZSHARD_RETURN_IF_ERROR(CheckRange(FLAGS_bucket_size, 1, kMaxInt64));
  }
  if (parsed.Given(FLAGS_max_world)) {
    ZSHARD_RETURN_IF_ERROR(CheckRange(FLAGS_max_world, 1, kMaxInt));
  }
  ZSHARD_RETURN_IF_ERROR(CheckRange(FLAGS_expert_parallel, 1, kMaxInt));
  o.plan.world = static_cast<int>(absl::GetFlag(FLAGS_world));
  o.plan.instances = static_cast<int>(absl::GetFlag(FLAGS_instances));
  o.plan.layout.bucket_size = absl::GetFlag(FLAGS_bucket_size);
  o.plan.layout.max_world = static_cast<int>(absl::GetFlag(FLAGS_max_world));
  o.plan.layout.expert_parallel =
      static_cast<int>(absl::GetFlag(FLAGS_expert_parallel));
  o.plan.layout.grad_reduce_in_fp32 = absl::GetFlag(FLAGS_grad_reduce_in_fp32);
  o.plan.layout.pad_for_high_nccl_busbw =
      absl::GetFlag(FLAGS_pad_for_high_nccl_busbw);
  ZSHARD_ASSIGN_OR_RETURN(o.model, ReadModel(parsed));
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
