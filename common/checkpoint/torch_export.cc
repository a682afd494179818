// ExportTorchCheckpoint: the manifest checked against the model, every file
// verified, the ranges checked to tile each param exactly once, the rank
// files gathered into whole params, and the torch file written.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/checkpoint/manifest.h"
#include "common/checkpoint/rank_file_format.h"
#include "common/checkpoint/rank_file_io.h"
#include "common/checkpoint/torch_convert.h"
#include "common/checkpoint/torch_file.h"
#include "common/checkpoint/torch_param_groups.h"
#include "common/checkpoint/verify.h"
#include "common/status.h"

namespace zshard::checkpoint {
namespace {

// A param's whole state.
struct ParamState {
  std::vector<float> master;
  std::vector<float> exp_avg;
  std::vector<float> exp_avg_sq;
};

// OK when the manifest's ranges cover each param's elements exactly once.
absl::Status CheckTiling(const v1::CheckpointManifest& m,
                         const plan::ModelSpec& model, const std::string& dir) {
  std::vector<std::vector<std::pair<int64_t, int64_t>>> ranges(
      model.params.size());
  for (const v1::CheckpointFile& f : m.files()) {
    for (const v1::ParamRange& r : f.ranges()) {
      ranges[r.param_index()].emplace_back(r.begin(), r.end());
    }
  }
  for (size_t p = 0; p < ranges.size(); ++p) {
    std::sort(ranges[p].begin(), ranges[p].end());
    int64_t covered = 0;
    for (const auto& [begin, end] : ranges[p]) {
      if (begin != covered) {
        return absl::DataLossError(absl::StrCat(
            "checkpoint '", dir, "': param '", model.params[p].name,
            begin > covered ? "' element " : "' elements from ",
            std::min(begin, covered),
            begin > covered ? " is in no file" : " are in two files"));
      }
      covered = end;
    }
    if (covered != model.params[p].numel()) {
      return absl::DataLossError(
          absl::StrCat("checkpoint '", dir, "': param '", model.params[p].name,
                       "' element ", covered, " is in no file"));
    }
  }
  return absl::OkStatus();
}

// Reads file `f` of the checkpoint into `params`.
absl::Status Gather(const std::string& dir, const v1::CheckpointManifest& m,
                    const v1::CheckpointFile& f,
                    std::vector<ParamState>& params) {
  const std::string path = absl::StrCat(dir, "/", f.path());
  ZSHARD_ASSIGN_OR_RETURN(RankFileContents contents,
                          ReadRankFileContents(path));
  if (contents.step != m.step() || contents.adam_step != m.adam_step()) {
    return absl::DataLossError(absl::StrCat(
        "checkpoint file ", path, " is of step ", contents.step, " (Adam step ",
        contents.adam_step, ") but its manifest of step ", m.step(),
        " (Adam step ", m.adam_step(), ")"));
  }
  bool same = static_cast<int>(contents.ranges.size()) == f.ranges_size();
  for (int i = 0; same && i < f.ranges_size(); ++i) {
    const RankFileRange& a = contents.ranges[i];
    const v1::ParamRange& b = f.ranges(i);
    same = a.param_index == b.param_index() &&
           a.expert_rank == b.expert_rank() && a.begin == b.begin() &&
           a.end == b.end();
  }
  if (!same) {
    return absl::DataLossError(
        absl::StrCat("checkpoint file ", path,
                     " holds other ranges than its manifest "
                     "records"));
  }
  for (RankFileRange& r : contents.ranges) {
    ParamState& p = params[r.param_index];
    std::copy(r.master.begin(), r.master.end(), p.master.begin() + r.begin);
    std::copy(r.exp_avg.begin(), r.exp_avg.end(), p.exp_avg.begin() + r.begin);
    std::copy(r.exp_avg_sq.begin(), r.exp_avg_sq.end(),
              p.exp_avg_sq.begin() + r.begin);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ExportSummary> ExportTorchCheckpoint(
    const std::string& checkpoint_dir, const plan::ModelSpec& model,
    const std::string& out_path, const ExportOptions& options) {
  ZSHARD_RETURN_IF_ERROR(plan::ValidateModelSpec(model));
  ZSHARD_ASSIGN_OR_RETURN(v1::CheckpointManifest m,
                          ReadManifest(checkpoint_dir));
  if (m.slot_params_size() > 0 || m.tensor() > 1 || m.pipeline() > 1 ||
      m.context() > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "checkpoint '", checkpoint_dir, "' is model-parallel (tensor ",
        std::max(1, m.tensor()), ", pipeline ", std::max(1, m.pipeline()),
        ", context ", std::max(1, m.context()),
        "): torch export of a model-parallel checkpoint is not supported"));
  }
  absl::Status fits = ValidateManifest(m, model);
  if (!fits.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint '", checkpoint_dir,
                     "' does not fit the job's model: ", fits.message()));
  }
  std::vector<ExpectedFile> expected;
  for (const v1::CheckpointFile& f : m.files()) {
    for (const v1::ParamRange& r : f.ranges()) {
      if (r.expert_rank() != 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "checkpoint '", checkpoint_dir, "' holds expert rank ",
            r.expert_rank(), " of param '", model.params[r.param_index()].name,
            "' (expert_parallel > 1); the torch export takes models with one "
            "copy of each param"));
      }
    }
    // The ranges must fit the file's recorded size (which VerifyFiles
    // checks), so that nothing is allocated for state no file holds.
    int64_t bytes = format::kHeaderBytes + format::kTrailerBytes;
    for (const v1::ParamRange& r : f.ranges()) {
      bytes += format::kRangeBytes +
               (r.end() - r.begin()) * format::kBytesPerElement;
    }
    if (bytes != f.bytes()) {
      return absl::DataLossError(absl::StrCat(
          "checkpoint file ", checkpoint_dir, "/", f.path(), " is recorded as ",
          f.bytes(), " bytes but its ranges take ", bytes));
    }
    expected.push_back({f.path(), f.bytes(), f.checksum()});
  }
  ZSHARD_RETURN_IF_ERROR(CheckTiling(m, model, checkpoint_dir));
  ZSHARD_RETURN_IF_ERROR(VerifyFiles(checkpoint_dir, expected));

  std::vector<ParamState> params(model.params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    const size_t n = static_cast<size_t>(model.params[i].numel());
    params[i].master.resize(n);
    params[i].exp_avg.resize(n);
    params[i].exp_avg_sq.resize(n);
  }
  for (const v1::CheckpointFile& f : m.files()) {
    ZSHARD_RETURN_IF_ERROR(Gather(checkpoint_dir, m, f, params));
  }

  TorchCheckpoint out;
  AdamWStateDict& opt = out.optimizer.emplace();
  int64_t index = 0;
  for (const TorchParamGroup& g :
       TorchParamGroups(model, options.adamw.weight_decay)) {
    AdamWParamGroup group;
    group.lr = options.adamw.lr;
    group.beta1 = options.adamw.beta1;
    group.beta2 = options.adamw.beta2;
    group.eps = options.adamw.eps;
    group.weight_decay = g.weight_decay;
    for (int p : g.params) {
      AdamWParamState& s = opt.state[index];
      s.step = static_cast<double>(m.adam_step());
      s.exp_avg = {model.params[p].shape, std::move(params[p].exp_avg)};
      s.exp_avg_sq = {model.params[p].shape, std::move(params[p].exp_avg_sq)};
      group.params.push_back(index++);
    }
    opt.param_groups.push_back(std::move(group));
  }
  for (size_t i = 0; i < params.size(); ++i) {
    out.model.push_back(NamedTensor{
        model.params[i].name,
        TorchTensor{model.params[i].shape, std::move(params[i].master)}, -1});
  }
  ZSHARD_RETURN_IF_ERROR(WriteTorchFile(out, out_path));
  ExportSummary summary;
  summary.step = m.step();
  summary.adam_step = m.adam_step();
  summary.params = static_cast<int>(model.params.size());
  summary.param_groups = static_cast<int>(opt.param_groups.size());
  return summary;
}

}  // namespace zshard::checkpoint
