// The model spec: a model's parameters in registration (forward) order, as
// read from JSON or built from a preset. Parsing is pure (text in, value out).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json_fwd.hpp"

namespace zshard::plan {

enum class DType { kBf16 = 0, kFp16 = 1, kFp32 = 2 };

// "bf16", "fp16", "fp32".
const char* DTypeName(DType dtype);
absl::StatusOr<DType> ParseDType(absl::string_view name);
int DTypeBytes(DType dtype);

struct ParamSpec {
  std::string name;
  std::vector<int64_t> shape;  // every dimension >= 1
  DType dtype = DType::kBf16;
  bool expert = false;            // sharded over the expert shard group
  bool shared_embedding = false;  // always gets a bucket of its own
  bool no_weight_decay = false;   // AdamW skips decoupled weight decay
  // Replicated across the tensor-parallel ranks of a model-parallel slot
  // (LayerNorm weights, biases of row-parallel layers): the global grad
  // norm counts it once, on tensor-parallel rank 0, as Megatron does.
  bool tp_replicated = false;

  // Product of the shape (validated not to overflow at parse time).
  int64_t numel() const;
};

struct ModelSpec {
  std::string name;
  std::vector<ParamSpec> params;  // registration (forward) order

  // Sum of numel() over params (unpadded parameter count P).
  int64_t numel() const;
};

// Parses and validates a model spec from JSON text:
// {"name": "...", "params": [{"name", "shape", "dtype", "expert",
//  "shared_embedding", "no_weight_decay", "tp_replicated"}, ...]}.
// InvalidArgument with one line naming the param and field on any problem.
absl::StatusOr<ModelSpec> ParseModelSpec(absl::string_view json_text);
// The same from an already parsed JSON value (e.g. inside a job spec).
absl::StatusOr<ModelSpec> ModelSpecFromJson(const nlohmann::json& j);
// Validates a spec built in code with the same rules as the parser: at
// least one param, non-empty unique names, non-empty shapes of dimensions
// >= 1, element counts (per param and in total) that fit in int64.
absl::Status ValidateModelSpec(const ModelSpec& spec);
// Serialises back to the JSON form ParseModelSpec reads; a flag that is
// false is left out.
std::string ModelSpecToJson(const ModelSpec& spec);

}  // namespace zshard::plan
