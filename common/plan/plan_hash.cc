// Canonical serialisation of the planner's inputs and its FNV-1a digest.
#include "common/plan/plan_hash.h"

#include "absl/strings/str_format.h"

namespace zshard::plan {

void Fnv1a64::Bytes(const void* data, size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) {
    state_ ^= p[i];
    state_ *= 0x100000001b3ull;
  }
}

void Fnv1a64::Int(int64_t value) {
  // Little-endian bytes, whatever the host's order.
  unsigned char bytes[8];
  uint64_t u = static_cast<uint64_t>(value);
  for (int i = 0; i < 8; ++i)
    bytes[i] = static_cast<unsigned char>(u >> (8 * i));
  Bytes(bytes, sizeof(bytes));
}

void Fnv1a64::Str(absl::string_view value) {
  Int(static_cast<int64_t>(value.size()));
  Bytes(value.data(), value.size());
}

std::string PlanHash(const ModelSpec& model, const PlanOptions& options) {
  Fnv1a64 h;
  h.Str("zshard-plan-v1");
  h.Int(options.world);
  h.Int(options.instances);
  const LayoutOptions& l = options.layout;
  h.Int(l.bucket_size);
  h.Int(l.max_world);
  h.Int(l.grad_reduce_in_fp32 ? 1 : 0);
  h.Int(l.pad_for_high_nccl_busbw ? 1 : 0);
  h.Int(l.expert_parallel);
  h.Int(static_cast<int64_t>(model.params.size()));
  for (const ParamSpec& p : model.params) {
    h.Str(p.name);
    h.Int(static_cast<int64_t>(p.shape.size()));
    for (int64_t d : p.shape) h.Int(d);
    h.Int(static_cast<int>(p.dtype));
    h.Int((p.expert ? 1 : 0) | (p.shared_embedding ? 2 : 0) |
          (p.no_weight_decay ? 4 : 0) | (p.tp_replicated ? 8 : 0));
  }
  return absl::StrFormat("%016x", h.digest());
}

}  // namespace zshard::plan
