// Splits a Llama-family preset over tensor and pipeline ranks by the rules
// of Megatron-LM's tensor-parallel layers (preset_slots.h), param by param,
// from the unsplit preset's names.
#include "common/plan/preset_slots.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/plan/presets.h"
#include "common/status.h"

namespace zshard::plan {
namespace {

// Megatron's make_vocab_size_divisible_by.
constexpr int64_t kVocabDivisor = 128;
constexpr char kLayers[] = "model.layers.";

enum class Split { kColumn, kRow, kVocab, kReplicated };

absl::StatusOr<Split> SplitOf(absl::string_view name) {
  for (const char* s :
       {"q_proj.weight", "k_proj.weight", "v_proj.weight", "gate_proj.weight",
        "up_proj.weight", "w1.weight", "w3.weight"}) {
    if (absl::EndsWith(name, s)) return Split::kColumn;
  }
  for (const char* s : {"o_proj.weight", "down_proj.weight", "w2.weight"}) {
    if (absl::EndsWith(name, s)) return Split::kRow;
  }
  if (absl::EndsWith(name, "embed_tokens.weight") || name == "lm_head.weight") {
    return Split::kVocab;
  }
  if (absl::EndsWith(name, "norm.weight") ||
      absl::EndsWith(name, "block_sparse_moe.gate.weight")) {
    return Split::kReplicated;
  }
  return absl::InternalError(
      absl::StrCat("param '", name, "' has no tensor-parallel rule"));
}

// The layer number of a "model.layers.N." param, or -1.
int LayerOf(absl::string_view name) {
  if (!absl::StartsWith(name, kLayers)) return -1;
  name.remove_prefix(sizeof(kLayers) - 1);
  int layer = -1;
  const size_t dot = name.find('.');
  if (!absl::SimpleAtoi(name.substr(0, dot), &layer)) return -1;
  return layer;
}

// `p` as tensor rank t of T holds it (every rank's shape is the same).
absl::StatusOr<ParamSpec> SplitParam(absl::string_view preset, ParamSpec p,
                                     int t) {
  ZSHARD_ASSIGN_OR_RETURN(const Split split, SplitOf(p.name));
  int dim = 0;
  switch (split) {
    case Split::kReplicated:
      p.tp_replicated = t > 1;
      return p;
    case Split::kVocab: {
      const int64_t multiple = kVocabDivisor * t;
      p.shape[0] = (p.shape[0] + multiple - 1) / multiple * multiple;
      break;
    }
    case Split::kColumn:
      break;
    case Split::kRow:
      dim = 1;
      break;
  }
  if (p.shape[dim] % t != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "preset '", preset, "': param '", p.name, "' dimension ", dim, " (",
        p.shape[dim], ") is not divisible by parallel.tensor (", t, ")"));
  }
  p.shape[dim] /= t;
  return p;
}

}  // namespace

absl::StatusOr<ParallelModel> PresetParallelModel(absl::string_view name,
                                                  const ParallelSizes& sizes) {
  ZSHARD_RETURN_IF_ERROR(CheckParallelWorld(sizes, sizes.replica_size()));
  ZSHARD_ASSIGN_OR_RETURN(const ModelSpec whole, PresetModel(name));
  if (!absl::StartsWith(name, "llama2-") &&
      !absl::StartsWith(name, "mixtral-")) {
    return absl::NotFoundError(absl::StrCat(
        "preset '", name,
        "' has no model-parallel layout (llama2-7b, llama2-13b, llama2-70b "
        "and mixtral-8x7b have)"));
  }
  int layers = 0;
  for (const ParamSpec& p : whole.params) {
    layers = std::max(layers, LayerOf(p.name) + 1);
  }
  if (layers % sizes.pipeline != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("preset '", name, "': its ", layers,
                     " layers are not divisible by parallel.pipeline (",
                     sizes.pipeline, ")"));
  }
  const int per_stage = layers / sizes.pipeline;
  std::vector<ModelSpec> stages(sizes.pipeline);
  for (const ParamSpec& p : whole.params) {
    const int layer = LayerOf(p.name);
    int stage = 0;
    if (layer >= 0) {
      stage = layer / per_stage;
    } else if (!absl::StrContains(p.name, "embed_tokens")) {
      stage = sizes.pipeline - 1;  // the final norm and the head
    }
    ZSHARD_ASSIGN_OR_RETURN(ParamSpec split, SplitParam(name, p, sizes.tensor));
    stages[stage].params.push_back(std::move(split));
  }
  ParallelModel model;
  model.sizes = sizes;
  model.slots.resize(sizes.slots());
  for (int pp = 0; pp < sizes.pipeline; ++pp) {
    for (int tp = 0; tp < sizes.tensor; ++tp) {
      ModelSpec& slot = model.slots[SlotIndex(sizes, tp, pp)];
      slot = stages[pp];
      slot.name = absl::StrCat(whole.name, ".tp", tp, ".pp", pp);
    }
  }
  return model;
}

}  // namespace zshard::plan
