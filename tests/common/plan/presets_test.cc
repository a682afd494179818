// Presets: parameter counts of the published models, flags and names.
#include "common/plan/presets.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace zshard::plan {
namespace {

TEST(PresetsTest, ParameterCountsMatchThePublishedModels) {
  const struct {
    const char* name;
    int64_t params;
  } kCounts[] = {
      {"gpt2-small", 124'439'808},    {"gpt2-xl", 1'557'611'200},
      {"llama2-7b", 6'738'415'616},   {"llama2-13b", 13'015'864'320},
      {"llama2-70b", 68'976'648'192}, {"mixtral-8x7b", 46'702'792'704},
  };
  ASSERT_EQ(PresetNames().size(), std::size(kCounts));
  for (const auto& c : kCounts) {
    absl::StatusOr<ModelSpec> spec = PresetModel(c.name);
    ASSERT_TRUE(spec.ok()) << c.name;
    EXPECT_EQ(spec->name, c.name);
    EXPECT_EQ(spec->numel(), c.params) << c.name;
    EXPECT_TRUE(ValidateModelSpec(*spec).ok()) << c.name;
  }
}

TEST(PresetsTest, FlagsAndNames) {
  ModelSpec gpt2 = *PresetModel("gpt2-small");
  EXPECT_EQ(gpt2.params[0].name, "transformer.wte.weight");
  EXPECT_TRUE(gpt2.params[0].shared_embedding);
  int shared = 0;
  for (const ParamSpec& p : gpt2.params) {
    shared += p.shared_embedding;
    EXPECT_EQ(p.dtype, DType::kBf16);
    EXPECT_EQ(p.no_weight_decay, p.shape.size() == 1) << p.name;
  }
  EXPECT_EQ(shared, 1);

  ModelSpec mixtral = *PresetModel("mixtral-8x7b");
  int expert = 0;
  int64_t expert_numel = 0;
  for (const ParamSpec& p : mixtral.params) {
    if (!p.expert) continue;
    ++expert;
    expert_numel += p.numel();
    EXPECT_THAT(p.name, ::testing::HasSubstr(".block_sparse_moe.experts."));
  }
  EXPECT_EQ(expert, 32 * 8 * 3);
  EXPECT_EQ(expert_numel, int64_t{32} * 8 * 3 * 14336 * 4096);

  ModelSpec llama = *PresetModel("llama2-70b");
  EXPECT_EQ(llama.params[2].name, "model.layers.0.self_attn.k_proj.weight");
  EXPECT_EQ(llama.params[2].shape, (std::vector<int64_t>{1024, 8192}));
}

TEST(PresetsTest, UnknownPresetIsNotFound) {
  absl::StatusOr<ModelSpec> spec = PresetModel("gpt5");
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(spec.status().message()),
              ::testing::HasSubstr("unknown preset 'gpt5' (known: gpt2-small"));
}

}  // namespace
}  // namespace zshard::plan
