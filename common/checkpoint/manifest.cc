// manifest.json: proto JSON, atomic writes, validation against the model.
#include "common/checkpoint/manifest.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/file_io.h"
#include "common/status.h"
#include "google/protobuf/util/json_util.h"

namespace zshard::checkpoint {

std::string ManifestPath(const std::string& dir) {
  return dir.empty() || dir.back() == '/' ? dir + "manifest.json"
                                          : dir + "/manifest.json";
}

absl::Status WriteManifest(const v1::CheckpointManifest& manifest) {
  if (manifest.dir().empty()) {
    return absl::InvalidArgumentError("checkpoint manifest has no dir");
  }
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  std::string json;
  auto s =
      google::protobuf::util::MessageToJsonString(manifest, &json, options);
  if (!s.ok()) {
    return absl::InternalError(
        absl::StrCat("manifest of step ", manifest.step(),
                     " does not convert to json: ", s.ToString()));
  }
  return WriteFileAtomic(ManifestPath(manifest.dir()), json);
}

absl::StatusOr<v1::CheckpointManifest> ReadManifest(const std::string& dir) {
  const std::string path = ManifestPath(dir);
  ZSHARD_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  v1::CheckpointManifest manifest;
  auto s = google::protobuf::util::JsonStringToMessage(text, &manifest);
  if (!s.ok()) {
    return absl::DataLossError(absl::StrCat(
        "manifest '", path, "' is not a checkpoint manifest: ", s.ToString()));
  }
  return manifest;
}

namespace {

plan::ParallelSizes SizesOf(const v1::CheckpointManifest& m) {
  return plan::ParallelSizes{std::max(1, m.tensor()), std::max(1, m.pipeline()),
                             std::max(1, m.context())};
}

// The manifest's params from `first` on are `model`'s.
absl::Status CheckParams(const v1::CheckpointManifest& m, int first,
                         const plan::ModelSpec& model) {
  const int n = static_cast<int>(model.params.size());
  for (int i = 0; i < n && first + i < m.param_names_size(); ++i) {
    const plan::ParamSpec& p = model.params[i];
    if (m.param_names(first + i) != p.name) {
      return absl::InvalidArgumentError(absl::StrCat(
          "param ", i, " is '", m.param_names(first + i),
          "' in the checkpoint but '", p.name, "' in the job's model"));
    }
    if (m.param_numels(first + i) != p.numel()) {
      return absl::InvalidArgumentError(
          absl::StrCat("param '", p.name, "' has ", m.param_numels(first + i),
                       " elements in the checkpoint but ", p.numel(),
                       " in the job's model"));
    }
  }
  if (m.param_names_size() - first < n) {
    return absl::InvalidArgumentError(
        absl::StrCat("the checkpoint has ", m.param_names_size() - first,
                     " params but the job's model has ", n));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateManifest(const v1::CheckpointManifest& m,
                              const plan::ModelSpec& model) {
  return ValidateSlotsManifest(m, plan::ParallelSizes(),
                               absl::MakeConstSpan(&model, 1));
}

absl::Status ValidateSlotsManifest(const v1::CheckpointManifest& m,
                                   const plan::ParallelSizes& sizes,
                                   absl::Span<const plan::ModelSpec> slots) {
  ZSHARD_RETURN_IF_ERROR(plan::CheckRestoreSizes(SizesOf(m), sizes));
  if (static_cast<int>(slots.size()) != sizes.slots()) {
    return absl::InvalidArgumentError(absl::StrCat("the job has ", slots.size(),
                                                   " slot models for ",
                                                   sizes.slots(), " slots"));
  }
  if (m.param_names_size() != m.param_numels_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("manifest lists ", m.param_names_size(),
                     " param names but ", m.param_numels_size(), " numels"));
  }
  const bool parallel = sizes.model_parallel();
  if (parallel && m.slot_params_size() != sizes.slots()) {
    return absl::InvalidArgumentError(
        absl::StrCat("manifest lists the params of ", m.slot_params_size(),
                     " slots but the job has ", sizes.slots()));
  }
  int first = 0;
  for (int s = 0; s < sizes.slots(); ++s) {
    const int n = static_cast<int>(slots[s].params.size());
    if (parallel && m.slot_params(s) != n) {
      return absl::InvalidArgumentError(
          absl::StrCat("slot (tp ", plan::SlotTp(sizes, s), ", pp ",
                       plan::SlotPp(sizes, s), ") has ", m.slot_params(s),
                       " params in the checkpoint but ", n, " in the job"));
    }
    ZSHARD_RETURN_IF_ERROR(CheckParams(m, first, slots[s]));
    first += n;
  }
  if (m.param_names_size() != first) {
    return absl::InvalidArgumentError(
        absl::StrCat("the checkpoint has ", m.param_names_size(),
                     " params but the job's model has ", first));
  }
  if (m.step() < 0 || m.adam_step() < 0) {
    return absl::InvalidArgumentError(
        "manifest step and adam_step must be >= 0");
  }
  if (m.files_size() == 0) {
    return absl::InvalidArgumentError("manifest lists no files");
  }
  for (const v1::CheckpointFile& f : m.files()) {
    if (f.path().empty() || f.path()[0] == '/' ||
        f.path().find("..") != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "checkpoint file path '", f.path(), "' must be relative"));
    }
    if (f.slot() < 0 || f.slot() >= sizes.slots()) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint file '", f.path(), "' has slot ", f.slot(),
                       " outside 0..", sizes.slots() - 1));
    }
    const plan::ModelSpec& model = slots[f.slot()];
    const int n = static_cast<int>(model.params.size());
    for (const v1::ParamRange& r : f.ranges()) {
      if (r.param_index() < 0 || r.param_index() >= n || r.begin() < 0 ||
          r.end() <= r.begin() ||
          r.end() > model.params[r.param_index()].numel() ||
          r.expert_rank() < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("checkpoint file '", f.path(),
                         "' has a range of param ", r.param_index(), " [",
                         r.begin(), ", ", r.end(), ") outside the model"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace zshard::checkpoint
