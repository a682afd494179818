// The plan hash: a 64-bit FNV-1a digest, as 16 lower-case hex digits, of a
// canonical serialisation of every input of MakePlan.
#pragma once

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "common/plan/model_spec.h"
#include "common/plan/plan.h"

namespace zshard::plan {

// Incremental 64-bit FNV-1a over length-prefixed, fixed-width fields, so
// that no two different field sequences serialise to the same bytes.
class Fnv1a64 {
 public:
  void Bytes(const void* data, size_t size);
  void Int(int64_t value);
  void Str(absl::string_view value);
  uint64_t digest() const { return state_; }

 private:
  uint64_t state_ = 0xcbf29ce484222325ull;
};

// Hex digest of (every param with every field, in registration order;
// every layout option as given; world; instances). The model's own name is
// not an input of the plan and is not hashed. Stable across runs and hosts.
std::string PlanHash(const ModelSpec& model, const PlanOptions& options);

}  // namespace zshard::plan
