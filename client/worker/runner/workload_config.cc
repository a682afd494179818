// ParseWorkloadConfig with nlohmann's non-throwing parser.

#include "client/worker/runner/workload_config.h"

#include "absl/strings/str_cat.h"
#include "common/job/workload_kind.h"
#include "nlohmann/json.hpp"

namespace zshard::worker {
namespace {

absl::Status ReadNonNegative(const nlohmann::json& section, const char* name,
                             int64_t* out) {
  auto it = section.find(name);
  if (it == section.end()) return absl::OkStatus();
  if (!it->is_number_integer() || it->get<int64_t>() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "job spec field 'workload.", name, "' must be a non-negative integer"));
  }
  *out = it->get<int64_t>();
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<WorkloadConfig> ParseWorkloadConfig(
    absl::string_view job_spec_json) {
  nlohmann::json spec =
      nlohmann::json::parse(job_spec_json.begin(), job_spec_json.end(), nullptr,
                            /*allow_exceptions=*/false);
  if (spec.is_discarded() || !spec.is_object()) {
    return absl::InvalidArgumentError("job spec is not a json object");
  }
  WorkloadConfig config;
  auto it = spec.find("workload");
  if (it == spec.end()) return config;
  if (!it->is_object()) {
    return absl::InvalidArgumentError(
        "job spec field 'workload' must be an object");
  }
  const nlohmann::json& workload = *it;
  if (auto kind = workload.find("kind"); kind != workload.end()) {
    if (!kind->is_string()) {
      return absl::InvalidArgumentError(
          "job spec field 'workload.kind' must be a string");
    }
    config.kind = kind->get<std::string>();
  }
  // The job spec's own check of the kind (every kind is one this worker
  // runs).
  absl::StatusOr<job::WorkloadKind> kind = job::ParseWorkloadKind(config.kind);
  if (!kind.ok()) return kind.status();
  absl::Status s = ReadNonNegative(workload, "steps", &config.steps);
  if (!s.ok()) return s;
  s = ReadNonNegative(workload, "step_delay_ms", &config.step_delay_ms);
  if (!s.ok()) return s;
  return config;
}

}  // namespace zshard::worker
