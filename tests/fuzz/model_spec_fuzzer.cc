// libFuzzer target for the model spec parser: any input must yield a spec
// or a one-line InvalidArgument, never a crash, and a parsed spec must
// survive a round trip through ModelSpecToJson unchanged.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "common/plan/model_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using zshard::plan::ModelSpec;
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<ModelSpec> spec = zshard::plan::ParseModelSpec(text);
  if (!spec.ok()) {
    if (spec.status().code() != absl::StatusCode::kInvalidArgument) abort();
    if (std::string(spec.status().message()).find('\n') != std::string::npos) {
      abort();
    }
    return 0;
  }
  if (!zshard::plan::ValidateModelSpec(*spec).ok()) abort();
  absl::StatusOr<ModelSpec> again =
      zshard::plan::ParseModelSpec(zshard::plan::ModelSpecToJson(*spec));
  if (!again.ok() || again->params.size() != spec->params.size() ||
      again->numel() != spec->numel()) {
    abort();
  }
  for (size_t i = 0; i < spec->params.size(); ++i) {
    const auto& a = spec->params[i];
    const auto& b = again->params[i];
    if (a.name != b.name || a.shape != b.shape || a.dtype != b.dtype ||
        a.expert != b.expert || a.shared_embedding != b.shared_embedding ||
        a.no_weight_decay != b.no_weight_decay) {
      abort();
    }
  }
  return 0;
}
