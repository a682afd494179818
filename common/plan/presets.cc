// Preset layouts of GPT-2, Llama 2 and Mixtral, built from each model's
// configuration (hidden size, layers, heads, vocabulary) in registration
// order, with Hugging Face parameter names.
#include "common/plan/presets.h"

#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace zshard::plan {
namespace {

class Builder {
 public:
  explicit Builder(std::string name) { spec_.name = std::move(name); }

  // Adds a weight (decayed unless it is one-dimensional).
  Builder& Add(std::string name, std::vector<int64_t> shape) {
    ParamSpec p;
    p.name = std::move(name);
    p.no_weight_decay = shape.size() == 1;
    p.shape = std::move(shape);
    spec_.params.push_back(std::move(p));
    return *this;
  }
  Builder& Flag(bool ParamSpec::*flag) {
    spec_.params.back().*flag = true;
    return *this;
  }
  ModelSpec Build() { return std::move(spec_); }

 private:
  ModelSpec spec_;
};

struct Gpt2Config {
  const char* name;
  int64_t hidden;
  int layers;
};

// GPT-2 (Conv1D weights are [in, out]); lm_head is tied to wte.
ModelSpec Gpt2(const Gpt2Config& c) {
  constexpr int64_t kVocab = 50257;
  constexpr int64_t kPositions = 1024;
  const int64_t h = c.hidden;
  Builder b(c.name);
  b.Add("transformer.wte.weight", {kVocab, h})
      .Flag(&ParamSpec::shared_embedding);
  b.Add("transformer.wpe.weight", {kPositions, h});
  for (int i = 0; i < c.layers; ++i) {
    std::string p = absl::StrCat("transformer.h.", i, ".");
    b.Add(p + "ln_1.weight", {h}).Add(p + "ln_1.bias", {h});
    b.Add(p + "attn.c_attn.weight", {h, 3 * h})
        .Add(p + "attn.c_attn.bias", {3 * h});
    b.Add(p + "attn.c_proj.weight", {h, h}).Add(p + "attn.c_proj.bias", {h});
    b.Add(p + "ln_2.weight", {h}).Add(p + "ln_2.bias", {h});
    b.Add(p + "mlp.c_fc.weight", {h, 4 * h}).Add(p + "mlp.c_fc.bias", {4 * h});
    b.Add(p + "mlp.c_proj.weight", {4 * h, h}).Add(p + "mlp.c_proj.bias", {h});
  }
  b.Add("transformer.ln_f.weight", {h}).Add("transformer.ln_f.bias", {h});
  return b.Build();
}

struct LlamaConfig {
  const char* name;
  int64_t hidden;
  int layers;
  int64_t intermediate;
  int64_t kv_dim;  // key/value heads x head dim (GQA when < hidden)
  int experts;     // 0: dense MLP; > 0: Mixtral sparse MoE
};

// Llama 2 / Mixtral: untied embed_tokens and lm_head, RMSNorm weights.
ModelSpec Llama(const LlamaConfig& c) {
  constexpr int64_t kVocab = 32000;
  const int64_t h = c.hidden;
  const int64_t f = c.intermediate;
  Builder b(c.name);
  b.Add("model.embed_tokens.weight", {kVocab, h});
  for (int i = 0; i < c.layers; ++i) {
    std::string p = absl::StrCat("model.layers.", i, ".");
    b.Add(p + "self_attn.q_proj.weight", {h, h});
    b.Add(p + "self_attn.k_proj.weight", {c.kv_dim, h});
    b.Add(p + "self_attn.v_proj.weight", {c.kv_dim, h});
    b.Add(p + "self_attn.o_proj.weight", {h, h});
    if (c.experts == 0) {
      b.Add(p + "mlp.gate_proj.weight", {f, h});
      b.Add(p + "mlp.up_proj.weight", {f, h});
      b.Add(p + "mlp.down_proj.weight", {h, f});
    } else {
      b.Add(p + "block_sparse_moe.gate.weight", {c.experts, h});
      for (int e = 0; e < c.experts; ++e) {
        std::string x = absl::StrCat(p, "block_sparse_moe.experts.", e, ".");
        b.Add(x + "w1.weight", {f, h}).Flag(&ParamSpec::expert);
        b.Add(x + "w2.weight", {h, f}).Flag(&ParamSpec::expert);
        b.Add(x + "w3.weight", {f, h}).Flag(&ParamSpec::expert);
      }
    }
    b.Add(p + "input_layernorm.weight", {h});
    b.Add(p + "post_attention_layernorm.weight", {h});
  }
  b.Add("model.norm.weight", {h});
  b.Add("lm_head.weight", {kVocab, h});
  return b.Build();
}

}  // namespace

std::vector<std::string> PresetNames() {
  return {"gpt2-small", "gpt2-xl",    "llama2-7b",
          "llama2-13b", "llama2-70b", "mixtral-8x7b"};
}

absl::StatusOr<ModelSpec> PresetModel(absl::string_view name) {
  if (name == "gpt2-small") return Gpt2({"gpt2-small", 768, 12});
  if (name == "gpt2-xl") return Gpt2({"gpt2-xl", 1600, 48});
  if (name == "llama2-7b") {
    return Llama({"llama2-7b", 4096, 32, 11008, 4096, 0});
  }
  if (name == "llama2-13b") {
    return Llama({"llama2-13b", 5120, 40, 13824, 5120, 0});
  }
  if (name == "llama2-70b") {
    return Llama({"llama2-70b", 8192, 80, 28672, 1024, 0});
  }
  if (name == "mixtral-8x7b") {
    return Llama({"mixtral-8x7b", 4096, 32, 14336, 1024, 8});
  }
  std::string shown(name.substr(0, 80));
  for (char& c : shown) {
    if (static_cast<unsigned char>(c) < 0x20) c = '?';
  }
  return absl::NotFoundError(
      absl::StrCat("unknown preset '", shown,
                   "' (known: ", absl::StrJoin(PresetNames(), ", "), ")"));
}

}  // namespace zshard::plan
