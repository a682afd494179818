// Built-in model presets with the published models' parameter names, shapes
// and counts (Hugging Face naming), all bf16, so layouts and ledgers can be
// computed without a model file.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/plan/model_spec.h"

namespace zshard::plan {

// The preset called `name` (one of PresetNames()). Norms and biases are
// flagged no_weight_decay; GPT-2's tied token embedding (wte) is listed once
// and flagged shared_embedding; Mixtral's expert weights are flagged expert.
// NotFound naming the preset and the known names otherwise.
absl::StatusOr<ModelSpec> PresetModel(absl::string_view name);

// Every preset name, in a fixed order: gpt2-small, gpt2-xl, llama2-7b,
// llama2-13b, llama2-70b, mixtral-8x7b.
std::vector<std::string> PresetNames();

}  // namespace zshard::plan
