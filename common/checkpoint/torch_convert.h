// Conversion between a zshard checkpoint directory (manifest.json and rank
// files) and a torch.save file holding {"model": state_dict, "optimizer":
// AdamW state_dict}: export, to leave for plain PyTorch with the optimizer
// state; import, to start a job (`zshard-coordinator --restore DIR`) from
// a pre-trained torch model, with or without its AdamW state. Offline:
// both hold a model's fp32 state in memory.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/plan/model_spec.h"

namespace zshard::checkpoint {

// The AdamW hyperparameters of the job (job::OptimizerSpec's fields), for
// the exported param groups.
struct AdamWSettings {
  double lr = 0.001;  // the base rate (a schedule's rates are not written)
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
};

struct ExportOptions {
  // The param groups' hyperparameters. Default: AdamWSettings's defaults.
  AdamWSettings adamw;
};

struct ExportSummary {
  int64_t step = 0;       // the checkpoint's training step
  int64_t adam_step = 0;  // written as each param's "step"
  int params = 0;
  int param_groups = 0;
};

// Writes the checkpoint in `checkpoint_dir` (DIR/step-NNNNNNNN) to the
// torch file `out_path`: the masters as the model's state_dict (fp32,
// each param's shape from `model`, in model order), exp_avg and exp_avg_sq
// as AdamW's state with "step" the Adam step (a float32 0-d tensor), and
// param groups from options.adamw (see torch_param_groups.h), so that
// torch.optim.AdamW over the same params accepts it in load_state_dict.
// Errors, one line each: NotFound (no manifest, a missing file);
// InvalidArgument when the checkpoint does not belong to `model`, or holds
// expert ranks > 0 (expert_parallel > 1, not exported); DataLoss when a
// file is damaged or the files do not cover every element exactly once;
// the I/O error naming out_path.
absl::StatusOr<ExportSummary> ExportTorchCheckpoint(
    const std::string& checkpoint_dir, const plan::ModelSpec& model,
    const std::string& out_path, const ExportOptions& options = {});

struct ImportOptions {
  // The job name the manifest records. Default empty (the coordinator
  // records its own job's name when it restores).
  std::string job;
  // The job's layout.expert_parallel: a model with expert params is
  // refused unless it is 1 (each expert param then has one copy). Default 1.
  int expert_parallel = 1;
  // The manifest's commit time, ms since the Unix epoch. Default 0, so
  // that the output depends on the inputs only.
  int64_t committed_ms = 0;
};

struct ImportSummary {
  std::string dir;   // the checkpoint's absolute directory
  int64_t step = 0;  // = adam_step: the training step the job resumes at
  int64_t adam_step = 0;
  bool with_optimizer = false;  // false: moments zero, Adam step 0
  int params = 0;
};

// Makes `out_dir` (created; it must not exist or be empty) a checkpoint of
// `model` that `zshard-coordinator --restore out_dir` accepts: one rank
// file (rank 0 of a world of 1, one instance) holding every param whole,
// and manifest.json. The torch file's state_dict must hold exactly the
// model's params, by name, with their shapes (a 0-d tensor matches shape
// [1]; a tied alias of a param, saved as the same storage view, is
// skipped). With an "optimizer" entry, its AdamW state becomes exp_avg,
// exp_avg_sq and the Adam step (one step for every param; the groups'
// params in order are the model's, or its decay split as
// torch_param_groups.h makes it); without one the moments are zero and
// the Adam step 0, a fine-tune from pre-trained weights. The training step
// recorded is the Adam step. InvalidArgument naming the first mismatch
// (a param missing, a key not in the model, a shape, amsgrad); the
// reader's errors for the file (torch_file.h); AlreadyExists when out_dir
// holds files.
absl::StatusOr<ImportSummary> ImportTorchCheckpoint(
    const std::string& torch_path, const plan::ModelSpec& model,
    const std::string& out_dir, const ImportOptions& options = {});

}  // namespace zshard::checkpoint
