// Model-parallel layouts of the Llama-family presets (llama2-7b, llama2-13b,
// llama2-70b, mixtral-8x7b): each slot's params as Megatron-LM splits them
// over T tensor ranks and P pipeline stages, so that ledgers and plans of a
// TP x PP job need no model file.
#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/plan/parallel_plan.h"

namespace zshard::plan {

// The preset `name` split for `sizes` (the context size does not change the
// slots). Megatron's rules, with the preset's Hugging Face names and global
// layer numbers:
// - Layers go to pipeline stages in contiguous, equal runs (L / P each);
//   stage 0 also holds embed_tokens, the last stage model.norm and lm_head.
// - Column-parallel weights are split on their output dim (dim 0): q_proj,
//   k_proj, v_proj, gate_proj, up_proj and the experts' w1 and w3.
// - Row-parallel weights are split on their input dim (dim 1): o_proj,
//   down_proj and the experts' w2.
// - embed_tokens and lm_head are vocab-parallel: the vocabulary is padded to
//   a multiple of 128 x T (Megatron's make_vocab_size_divisible_by) and
//   split on dim 0.
// - RMSNorm weights and Mixtral's router are replicated: tp_replicated
//   when T > 1 (so T = P = 1 gives the preset itself).
// InvalidArgument when a size does not divide what it splits (the layers,
// a dimension), NotFound for a preset with no model-parallel layout.
absl::StatusOr<ParallelModel> PresetParallelModel(absl::string_view name,
                                                  const ParallelSizes& sizes);

}  // namespace zshard::plan
