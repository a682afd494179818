// ImportTorchCheckpoint: the torch file's params matched to the model by
// name and shape, its AdamW state (if any) mapped to the model's params,
// then one rank file with every param whole and its manifest.
#include <limits.h>
#include <stdlib.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/checkpoint/manifest.h"
#include "common/checkpoint/rank_file_io.h"
#include "common/checkpoint/torch_convert.h"
#include "common/checkpoint/torch_file.h"
#include "common/checkpoint/torch_param_groups.h"
#include "common/status.h"

namespace zshard::checkpoint {
namespace {

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// A torch shape fits the model's: equal, or a 0-d tensor for shape [1]
// (how zshard's model spec writes a 0-d param).
bool ShapeFits(const std::vector<int64_t>& torch,
               const std::vector<int64_t>& spec) {
  return torch == spec || (torch.empty() && spec == std::vector<int64_t>{1});
}

// The index in checkpoint.model of each of the model's params.
absl::StatusOr<std::vector<int>> MatchParams(const TorchCheckpoint& ckpt,
                                             const plan::ModelSpec& model,
                                             const std::string& path) {
  std::map<std::string, int> by_name;
  for (int i = 0; i < static_cast<int>(ckpt.model.size()); ++i) {
    by_name.emplace(ckpt.model[i].name, i);
  }
  std::vector<int> out;
  std::vector<bool> used(ckpt.model.size(), false);
  for (const plan::ParamSpec& p : model.params) {
    auto it = by_name.find(p.name);
    if (it == by_name.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("param '", p.name,
                       "' of the job's model is not in the "
                       "torch file '",
                       path, "'"));
    }
    const TorchTensor& t = ckpt.model[it->second].tensor;
    if (!ShapeFits(t.shape, p.shape)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "param '", p.name, "' has shape ", ShapeText(t.shape), " (",
          t.values.size(), " elements) in the torch file but ",
          ShapeText(p.shape), " (", p.numel(), ") in the job's model"));
    }
    used[it->second] = true;
    out.push_back(it->second);
  }
  for (size_t i = 0; i < ckpt.model.size(); ++i) {
    const NamedTensor& t = ckpt.model[i];
    if (used[i] || (t.alias_of >= 0 && used[t.alias_of])) continue;
    return absl::InvalidArgumentError(absl::StrCat(
        "torch file '", path, "' holds '", t.name,
        "', which is not a param of the job's model (a buffer, or a model of "
        "other params?)"));
  }
  return out;
}

// exp_avg, exp_avg_sq and the Adam step of each param from the AdamW
// state, in `contents`' ranges (one per param, model order).
absl::Status TakeOptimizer(AdamWStateDict& opt, const plan::ModelSpec& model,
                           RankFileContents& contents) {
  const int n = static_cast<int>(model.params.size());
  std::vector<int64_t> ids;  // the groups' params in order
  for (const AdamWParamGroup& g : opt.param_groups) {
    if (g.amsgrad || g.maximize) {
      return absl::InvalidArgumentError(
          absl::StrCat("the torch file's optimizer uses ",
                       g.amsgrad ? "amsgrad" : "maximize",
                       ", which zshard's AdamW does not"));
    }
    ids.insert(ids.end(), g.params.begin(), g.params.end());
  }
  if (static_cast<int>(ids.size()) != n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the torch file's optimizer has ", ids.size(),
        " params in its param_groups but the job's model has ", n));
  }
  // Which model param each position of `ids` is.
  std::vector<int> param_at;
  const std::vector<std::vector<int>> split = DecaySplit(model);
  if (opt.param_groups.size() == 1) {
    for (int i = 0; i < n; ++i) param_at.push_back(i);
  } else if (opt.param_groups.size() == 2 &&
             opt.param_groups[0].params.size() == split[0].size()) {
    param_at = split[0];
    param_at.insert(param_at.end(), split[1].begin(), split[1].end());
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "the torch file's optimizer has ", opt.param_groups.size(),
        " param groups; zshard reads one group of the model's params in "
        "order, or two: the params with weight decay, then those marked "
        "no_weight_decay"));
  }
  if (opt.state.empty()) return absl::OkStatus();  // built, never stepped
  std::map<int64_t, int> seen;
  for (int j = 0; j < n; ++j) {
    const plan::ParamSpec& p = model.params[param_at[j]];
    if (!seen.emplace(ids[j], param_at[j]).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the torch file's optimizer lists param index ", ids[j], " twice"));
    }
    auto it = opt.state.find(ids[j]);
    if (it == opt.state.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the torch file's optimizer has no state for param '", p.name,
          "' (index ", ids[j], ") but has some for others"));
    }
    AdamWParamState& s = it->second;
    if (!ShapeFits(s.exp_avg.shape, p.shape) ||
        !ShapeFits(s.exp_avg_sq.shape, p.shape)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the torch file's optimizer state of param '", p.name, "' (index ",
          ids[j], ") has shape ", ShapeText(s.exp_avg.shape), " but the param ",
          ShapeText(p.shape), " (param_groups not in the model's order?)"));
    }
    if (!(s.step >= 0) || s.step != std::floor(s.step) || s.step > 9e15) {
      return absl::InvalidArgumentError(
          absl::StrCat("the torch file's optimizer state of param '", p.name,
                       "' has step ", s.step, ", not a whole number >= 0"));
    }
    const int64_t step = static_cast<int64_t>(s.step);
    if (j > 0 && step != contents.adam_step) {
      return absl::InvalidArgumentError(
          absl::StrCat("the torch file's optimizer state of param '", p.name,
                       "' has step ", step, " but others ", contents.adam_step,
                       "; zshard keeps one Adam step"));
    }
    contents.adam_step = step;
    RankFileRange& r = contents.ranges[param_at[j]];
    r.exp_avg = std::move(s.exp_avg.values);
    r.exp_avg_sq = std::move(s.exp_avg_sq.values);
  }
  contents.step = contents.adam_step;
  return absl::OkStatus();
}

// Creates `dir` when missing; AlreadyExists when it holds anything.
absl::Status FreshDir(const std::string& dir) {
  std::error_code ec;
  if (std::filesystem::exists(dir, ec)) {
    if (!std::filesystem::is_directory(dir, ec)) {
      return absl::AlreadyExistsError(
          absl::StrCat("'", dir, "' exists and is not a directory"));
    }
    if (!std::filesystem::is_empty(dir, ec) || ec) {
      return absl::AlreadyExistsError(
          absl::StrCat("'", dir,
                       "' is not empty; the import makes a new checkpoint "
                       "directory"));
    }
    return absl::OkStatus();
  }
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create directory '", dir, "': ", ec.message()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ImportSummary> ImportTorchCheckpoint(
    const std::string& torch_path, const plan::ModelSpec& model,
    const std::string& out_dir, const ImportOptions& options) {
  ZSHARD_RETURN_IF_ERROR(plan::ValidateModelSpec(model));
  if (options.expert_parallel != 1) {
    for (const plan::ParamSpec& p : model.params) {
      if (p.expert) {
        return absl::InvalidArgumentError(absl::StrCat(
            "param '", p.name,
            "' is an expert param and the job's "
            "expert_parallel is ",
            options.expert_parallel,
            "; the torch import takes models with one copy of each param"));
      }
    }
  }
  ZSHARD_ASSIGN_OR_RETURN(TorchCheckpoint ckpt, ReadTorchFile(torch_path));
  ZSHARD_ASSIGN_OR_RETURN(std::vector<int> index,
                          MatchParams(ckpt, model, torch_path));
  RankFileContents contents;
  for (size_t i = 0; i < model.params.size(); ++i) {
    RankFileRange r;
    r.param_index = static_cast<int>(i);
    r.end = model.params[i].numel();
    r.master = std::move(ckpt.model[index[i]].tensor.values);
    r.exp_avg.assign(r.master.size(), 0.0f);
    r.exp_avg_sq.assign(r.master.size(), 0.0f);
    contents.ranges.push_back(std::move(r));
  }
  if (ckpt.optimizer.has_value()) {
    ZSHARD_RETURN_IF_ERROR(TakeOptimizer(*ckpt.optimizer, model, contents));
  }

  ZSHARD_RETURN_IF_ERROR(FreshDir(out_dir));
  char resolved[PATH_MAX];
  const std::string dir = realpath(out_dir.c_str(), resolved) != nullptr
                              ? std::string(resolved)
                              : out_dir;
  ZSHARD_ASSIGN_OR_RETURN(WrittenRankFile file,
                          WriteRankFileContents(contents, dir));
  v1::CheckpointManifest m;
  m.set_job(options.job);
  m.set_step(contents.step);
  m.set_adam_step(contents.adam_step);
  m.set_epoch(0);
  m.set_world(1);
  m.set_instances(1);
  m.set_dir(dir);
  v1::CheckpointFile* f = m.add_files();
  f->set_path(file.name);
  f->set_rank(0);
  f->set_bytes(file.bytes);
  f->set_checksum(file.checksum);
  for (const RankFileRange& r : contents.ranges) {
    v1::ParamRange* pr = f->add_ranges();
    pr->set_param_index(r.param_index);
    pr->set_expert_rank(0);
    pr->set_begin(0);
    pr->set_end(r.end);
  }
  for (const plan::ParamSpec& p : model.params) {
    m.add_param_names(p.name);
    m.add_param_numels(p.numel());
  }
  m.set_committed_ms(options.committed_ms);
  m.set_bytes(file.bytes);
  ZSHARD_RETURN_IF_ERROR(WriteManifest(m));

  ImportSummary summary;
  summary.dir = dir;
  summary.step = contents.step;
  summary.adam_step = contents.adam_step;
  summary.with_optimizer = ckpt.optimizer.has_value();
  summary.params = static_cast<int>(model.params.size());
  return summary;
}

}  // namespace zshard::checkpoint
