// model.slots, the preset split and the world checks of model-parallel jobs,
// and the slots' plan options.
#include "common/job/job_parallel.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/plan/preset_slots.h"
#include "common/status.h"

namespace zshard::job {
namespace {

std::string SlotName(int tp, int pp) {
  return absl::StrCat("slot (tp ", tp, ", pp ", pp, ")");
}

// Reads the integer `key` of slot entry `who` in [0, limit).
absl::StatusOr<int> ReadIndex(const nlohmann::json& entry,
                              const std::string& who, const char* key,
                              int limit, const char* size) {
  auto it = entry.find(key);
  if (it == entry.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat(who, ".", key, " is missing"));
  }
  if (!it->is_number_integer()) {
    return absl::InvalidArgumentError(
        absl::StrCat(who, ".", key, " must be an integer"));
  }
  const int64_t v = it->get<int64_t>();
  if (v < 0 || v >= limit) {
    return absl::InvalidArgumentError(
        absl::StrCat(who, ".", key, " (", v, ") is out of range [0, ", limit,
                     "): parallel.", size, " is ", limit));
  }
  return static_cast<int>(v);
}

}  // namespace

absl::Status ParseModelSlots(const nlohmann::json& slots, JobSpec& spec) {
  const plan::ParallelSizes& sizes = spec.parallel;
  if (!sizes.model_parallel()) {
    return absl::InvalidArgumentError(
        "model.slots needs parallel with tensor, pipeline or context above 1");
  }
  if (!slots.is_array()) {
    return absl::InvalidArgumentError("model.slots must be an array");
  }
  std::vector<plan::ModelSpec> out(sizes.slots());
  std::vector<bool> seen(sizes.slots(), false);
  for (size_t i = 0; i < slots.size(); ++i) {
    const nlohmann::json& entry = slots[i];
    const std::string who = absl::StrCat("model.slots[", i, "]");
    if (!entry.is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat(who, " must be an object"));
    }
    for (const auto& item : entry.items()) {
      const std::string& key = item.key();
      if (key != "tp" && key != "pp" && key != "params" && key != "name") {
        return absl::InvalidArgumentError(
            absl::StrCat("unknown field ", who, ".", key));
      }
    }
    ZSHARD_ASSIGN_OR_RETURN(
        const int tp, ReadIndex(entry, who, "tp", sizes.tensor, "tensor"));
    ZSHARD_ASSIGN_OR_RETURN(
        const int pp, ReadIndex(entry, who, "pp", sizes.pipeline, "pipeline"));
    const int s = plan::SlotIndex(sizes, tp, pp);
    if (seen[s]) {
      return absl::InvalidArgumentError(
          absl::StrCat(who, " duplicates ", SlotName(tp, pp)));
    }
    seen[s] = true;
    absl::StatusOr<plan::ModelSpec> model = plan::ModelSpecFromJson(entry);
    if (!model.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(who, ": ", model.status().message()));
    }
    out[s] = *std::move(model);
  }
  for (int s = 0; s < sizes.slots(); ++s) {
    if (!seen[s]) {
      return absl::InvalidArgumentError(
          absl::StrCat("model.slots has no ",
                       SlotName(plan::SlotTp(sizes, s), plan::SlotPp(sizes, s)),
                       ": it needs one entry for each of the ", sizes.slots(),
                       " slots of parallel.tensor x parallel.pipeline"));
    }
  }
  spec.slots = std::move(out);
  return absl::OkStatus();
}

absl::Status SplitPresetSlots(JobSpec& spec) {
  absl::StatusOr<plan::ParallelModel> model =
      plan::PresetParallelModel(spec.model_preset, spec.parallel);
  if (!model.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("model.preset: ", model.status().message()));
  }
  spec.slots = std::move(model->slots);
  spec.model = plan::ModelSpec();
  return absl::OkStatus();
}

nlohmann::json ModelSlotsToJson(const JobSpec& spec) {
  nlohmann::json slots = nlohmann::json::array();
  for (size_t s = 0; s < spec.slots.size(); ++s) {
    nlohmann::json j =
        nlohmann::json::parse(plan::ModelSpecToJson(spec.slots[s]));
    if (spec.slots[s].name.empty()) j.erase("name");
    j["tp"] = plan::SlotTp(spec.parallel, static_cast<int>(s));
    j["pp"] = plan::SlotPp(spec.parallel, static_cast<int>(s));
    slots.push_back(std::move(j));
  }
  return nlohmann::json{{"slots", std::move(slots)}};
}

absl::Status CheckParallelJobWorld(const JobSpec& spec) {
  const plan::ParallelSizes& p = spec.parallel;
  if (!p.model_parallel()) return absl::OkStatus();
  const int replica = p.replica_size();
  for (const auto& [name, value] :
       {std::pair<const char*, int>{"max", spec.world.max},
        std::pair<const char*, int>{"min", spec.world.min}}) {
    if (value % replica != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "world.", name, " (", value,
          ") is not a multiple of parallel.tensor x pipeline x context (",
          replica, ")"));
    }
  }
  const int dp = spec.world.max / p.slots();  // R x C at world.max
  if (dp % spec.world.instances != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "world.instances (", spec.world.instances,
        ") does not divide the data-parallel size R x C at world.max (", dp,
        ")"));
  }
  return absl::OkStatus();
}

}  // namespace zshard::job
