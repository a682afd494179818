// Model and world options of zshardctl plan and ledger.
#include "client/ctl/model_options.h"

#include <cstdio>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/file_io.h"
#include "common/plan/presets.h"
#include "common/status.h"

namespace zshard::ctl {
namespace {

constexpr int64_t kMaxInt = std::numeric_limits<int>::max();
constexpr int64_t kMaxInt64 = std::numeric_limits<int64_t>::max();

absl::StatusOr<plan::ModelSpec> ReadModel(const ParsedFlags& flags) {
  const bool file = flags.Has("model");
  const bool preset = flags.Has("preset");
  if (file && preset) {
    return absl::InvalidArgumentError(
        "give either --model or --preset, not both");
  }
  if (!file && !preset) {
    return absl::InvalidArgumentError(
        "--model FILE or --preset NAME is required");
  }
  if (preset) return plan::PresetModel(flags.Get("preset", ""));
  const std::string path = flags.Get("model", "");
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

std::vector<FlagSpec> ModelFlagSpecs() {
  return {{"model"},
          {"preset"},
          {"world"},
          {"instances"},
          {"bucket-size"},
          {"max-world"},
          {"expert-parallel"},
          {"grad-reduce-in-fp32", false},
          {"pad-for-high-nccl-busbw", false},
          {"output"},
          {"help", false}};
}

absl::StatusOr<ModelOptions> ReadModelOptions(const ParsedFlags& flags) {
  ModelOptions o;
  const std::string output = flags.Get("output", "table");
  if (output == "table") {
    o.output = OutputFormat::kTable;
  } else if (output == "json") {
    o.output = OutputFormat::kJson;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "--output must be table or json (got '", output.substr(0, 40), "')"));
  }
  if (!flags.Has("world")) {
    return absl::InvalidArgumentError("--world W is required");
  }
  ZSHARD_ASSIGN_OR_RETURN(int64_t world, flags.GetInt("world", 0, 1, kMaxInt));
  ZSHARD_ASSIGN_OR_RETURN(int64_t instances,
                          flags.GetInt("instances", 1, 1, kMaxInt));
  ZSHARD_ASSIGN_OR_RETURN(int64_t bucket_size,
                          flags.GetInt("bucket-size", 0, 1, kMaxInt64));
  ZSHARD_ASSIGN_OR_RETURN(int64_t max_world,
                          flags.GetInt("max-world", 0, 1, kMaxInt));
  ZSHARD_ASSIGN_OR_RETURN(int64_t expert_parallel,
                          flags.GetInt("expert-parallel", 1, 1, kMaxInt));
  o.plan.world = static_cast<int>(world);
  o.plan.instances = static_cast<int>(instances);
  o.plan.layout.bucket_size = bucket_size;
  o.plan.layout.max_world = static_cast<int>(max_world);
  o.plan.layout.expert_parallel = static_cast<int>(expert_parallel);
  o.plan.layout.grad_reduce_in_fp32 = flags.Has("grad-reduce-in-fp32");
  o.plan.layout.pad_for_high_nccl_busbw = flags.Has("pad-for-high-nccl-busbw");
  ZSHARD_ASSIGN_OR_RETURN(o.model, ReadModel(flags));
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
