// Model spec parser: valid specs, defaults, round trip, and one clear error
// per kind of bad input.
#include "common/plan/model_spec.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace zshard::plan {
namespace {

using ::testing::HasSubstr;

TEST(ModelSpecTest, ParsesFieldsAndDefaults) {
  absl::StatusOr<ModelSpec> spec = ParseModelSpec(R"({"name": "m", "params": [
      {"name": "a", "shape": [3, 4]},
      {"name": "b", "shape": [5], "dtype": "fp32", "expert": true,
       "shared_embedding": true, "no_weight_decay": true}]})");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name, "m");
  ASSERT_EQ(spec->params.size(), 2u);
  EXPECT_EQ(spec->params[0].dtype, DType::kBf16);
  EXPECT_FALSE(spec->params[0].expert);
  EXPECT_FALSE(spec->params[0].shared_embedding);
  EXPECT_FALSE(spec->params[0].no_weight_decay);
  EXPECT_EQ(spec->params[0].numel(), 12);
  EXPECT_EQ(spec->params[1].dtype, DType::kFp32);
  EXPECT_TRUE(spec->params[1].expert);
  EXPECT_TRUE(spec->params[1].shared_embedding);
  EXPECT_TRUE(spec->params[1].no_weight_decay);
  EXPECT_EQ(spec->numel(), 17);
}

TEST(ModelSpecTest, RoundTripsThroughJson) {
  absl::StatusOr<ModelSpec> spec = ParseModelSpec(
      R"({"name": "m", "params": [{"name": "a\nb", "shape": [2, 3],
          "dtype": "fp16", "no_weight_decay": true}]})");
  ASSERT_TRUE(spec.ok()) << spec.status();
  absl::StatusOr<ModelSpec> again = ParseModelSpec(ModelSpecToJson(*spec));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->params[0].name, "a\nb");
  EXPECT_EQ(again->params[0].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(again->params[0].dtype, DType::kFp16);
  EXPECT_TRUE(again->params[0].no_weight_decay);
}

TEST(ModelSpecTest, TpReplicatedParsesRoundTripsAndIsLeftOutWhenFalse) {
  constexpr char kOld[] =
      R"({"name":"m","params":[{"name":"a","shape":[4],"dtype":"bf16"}]})";
  absl::StatusOr<ModelSpec> old = ParseModelSpec(kOld);
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_FALSE(old->params[0].tp_replicated);
  EXPECT_EQ(ModelSpecToJson(*old), kOld);  // byte for byte as before

  absl::StatusOr<ModelSpec> spec = ParseModelSpec(
      R"({"name": "m", "params": [{"name": "ln", "shape": [4],
          "tp_replicated": true}]})");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(spec->params[0].tp_replicated);
  const std::string json = ModelSpecToJson(*spec);
  EXPECT_THAT(json, HasSubstr("\"tp_replicated\":true"));
  absl::StatusOr<ModelSpec> again = ParseModelSpec(json);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->params[0].tp_replicated);

  absl::StatusOr<ModelSpec> bad = ParseModelSpec(
      R"({"params": [{"name": "ln", "shape": [4], "tp_replicated": 1}]})");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("param 'ln' field 'tp_replicated' is not a boolean"));
}

TEST(ModelSpecTest, DTypeHelpers) {
  for (DType d : {DType::kBf16, DType::kFp16, DType::kFp32}) {
    absl::StatusOr<DType> parsed = ParseDType(DTypeName(d));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, d);
  }
  EXPECT_EQ(DTypeBytes(DType::kBf16), 2);
  EXPECT_EQ(DTypeBytes(DType::kFp16), 2);
  EXPECT_EQ(DTypeBytes(DType::kFp32), 4);
  EXPECT_FALSE(ParseDType("int8").ok());
}

struct BadCase {
  const char* json;
  const char* message;
};

TEST(ModelSpecTest, RejectsBadInputWithOneClearLine) {
  const BadCase cases[] = {
      {"", "invalid json"},
      {"{\"params\": [", "invalid json"},
      {"[]", "top level is not a json object"},
      {"{}", "'params' is missing"},
      {R"({"params": {}})", "'params' is not an array"},
      {R"({"params": []})", "'params' is empty"},
      {R"({"params": [3]})", "param 0 is not an object"},
      {R"({"params": [{"shape": [1]}]})", "param 0 has no 'name'"},
      {R"({"params": [{"name": 7, "shape": [1]}]})",
       "param 0 field 'name' is not a string"},
      {R"({"params": [{"name": "", "shape": [1]}]})",
       "param 0 field 'name' is empty"},
      {R"({"params": [{"name": "a", "shape": [1]}, {"name": "a", "shape": [2]}]})",
       "duplicate param name 'a' (params 0 and 1)"},
      {R"({"params": [{"name": "a"}]})", "param 'a' has no 'shape'"},
      {R"({"params": [{"name": "a", "shape": []}]})",
       "param 'a' field 'shape' is empty"},
      {R"({"params": [{"name": "a", "shape": 5}]})",
       "param 'a' field 'shape' is not an array"},
      {R"({"params": [{"name": "a", "shape": [4, 0]}]})",
       "param 'a' field 'shape' dimension 1 is zero"},
      {R"({"params": [{"name": "a", "shape": [-3]}]})",
       "param 'a' field 'shape' dimension 0 is negative (-3)"},
      {R"({"params": [{"name": "a", "shape": [2.5]}]})",
       "param 'a' field 'shape' dimension 0 is not an integer"},
      {R"({"params": [{"name": "a", "shape": ["4"]}]})",
       "param 'a' field 'shape' dimension 0 is not an integer"},
      {R"({"params": [{"name": "a", "shape": [18446744073709551615]}]})",
       "param 'a' field 'shape' dimension 0 is too large"},
      {R"({"params": [{"name": "a", "shape": [4294967296, 4294967296]}]})",
       "param 'a' field 'shape' has more than 2^63-1 elements"},
      {R"({"params": [{"name": "a", "shape": [4611686018427387904]},
                      {"name": "b", "shape": [4611686018427387904]}]})",
       "total element count overflows int64 at param 'b'"},
      {R"({"params": [{"name": "a", "shape": [1], "dtype": "int8"}]})",
       "param 'a' field 'dtype' is unknown: 'int8'"},
      {R"({"params": [{"name": "a", "shape": [1], "dtype": 16}]})",
       "param 'a' field 'dtype' is not a string"},
      {R"({"params": [{"name": "a", "shape": [1], "expert": 1}]})",
       "param 'a' field 'expert' is not a boolean"},
      {R"({"params": [{"name": "a", "shape": [1], "sharded": true}]})",
       "param 'a' has unknown field 'sharded'"},
      {R"({"name": 3, "params": [{"name": "a", "shape": [1]}]})",
       "field 'name' is not a string"},
  };
  for (const BadCase& c : cases) {
    absl::StatusOr<ModelSpec> spec = ParseModelSpec(c.json);
    ASSERT_FALSE(spec.ok()) << c.json;
    EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(spec.status().message()), HasSubstr(c.message))
        << c.json;
    EXPECT_EQ(std::string(spec.status().message()).find('\n'),
              std::string::npos)
        << c.json;
  }
}

TEST(ModelSpecTest, ErrorNamesStayOnOneLine) {
  absl::StatusOr<ModelSpec> spec =
      ParseModelSpec(R"({"params": [{"name": "x\ny", "shape": [0]}]})");
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(std::string(spec.status().message()), HasSubstr("'x\\ny'"));
}

TEST(ModelSpecTest, ValidateCatchesSpecsBuiltInCode) {
  ModelSpec spec;
  EXPECT_FALSE(ValidateModelSpec(spec).ok());
  spec.params.push_back({"a", {2, 3}});
  EXPECT_TRUE(ValidateModelSpec(spec).ok());
  spec.params.push_back({"a", {1}});
  EXPECT_THAT(std::string(ValidateModelSpec(spec).message()),
              HasSubstr("duplicate param name 'a'"));
  spec.params.back().name = "b";
  spec.params.back().shape = {0};
  EXPECT_THAT(std::string(ValidateModelSpec(spec).message()),
              HasSubstr("param 'b' field 'shape' dimension 0"));
}

}  // namespace
}  // namespace zshard::plan
