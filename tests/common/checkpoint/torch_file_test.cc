// Torch files: what WriteTorchFile writes reads back bit for bit (the same
// bytes every time); files laid out as torch.save lays them out (plain
// state_dicts, views with offsets and strides, bf16 and fp16 storages,
// tied weights) are read; anything else is refused in one line naming the
// key.
#include "common/checkpoint/torch_file.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/checkpoint/pickle_writer.h"
#include "common/checkpoint/torch_tensor_view.h"
#include "common/checkpoint/zip_writer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

namespace zshard::checkpoint {
namespace {

using ::testing::HasSubstr;

float Bits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

// Equal bit for bit (NaN payloads and -0 included).
void ExpectSameBits(const std::vector<float>& a, const std::vector<float>& b,
                    const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0)
      << what;
}

TorchCheckpoint Sample() {
  TorchCheckpoint c;
  c.model.push_back(
      {"layer.weight", {{2, 3}, {1, -2, 3.5f, 0, -0.0f, 1e-40f}}});
  c.model.push_back({"layer.bias", {{3}, {Bits(0x7fc01234), INFINITY, -1}}});
  c.model.push_back({"scale", {{}, {0.25f}}});
  c.model.push_back({"deep", {{2, 1, 2, 1}, {1, 2, 3, 4}}});
  AdamWStateDict& opt = c.optimizer.emplace();
  for (int64_t i = 0; i < 4; ++i) {
    const TorchTensor& t = c.model[i].tensor;
    AdamWParamState& s = opt.state[i];
    s.step = 7;
    s.exp_avg = t;
    s.exp_avg_sq = t;
    for (float& v : s.exp_avg_sq.values) v = v * v;
  }
  AdamWParamGroup decay;
  decay.lr = 0.003;
  decay.weight_decay = 0.1;
  decay.params = {0, 3};
  AdamWParamGroup plain = decay;
  plain.weight_decay = 0;
  plain.params = {1, 2};
  opt.param_groups = {decay, plain};
  return c;
}

TEST(TorchFileTest, RoundTripIsBitExact) {
  const TorchCheckpoint want = Sample();
  absl::StatusOr<std::string> bytes = EncodeTorchFile(want);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(*bytes, *EncodeTorchFile(want));  // deterministic
  absl::StatusOr<TorchCheckpoint> got = ParseTorchFile(*bytes, "t.pt");
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->model.size(), want.model.size());
  for (size_t i = 0; i < want.model.size(); ++i) {
    EXPECT_EQ(got->model[i].name, want.model[i].name);
    EXPECT_EQ(got->model[i].tensor.shape, want.model[i].tensor.shape);
    EXPECT_EQ(got->model[i].alias_of, -1);
    ExpectSameBits(got->model[i].tensor.values, want.model[i].tensor.values,
                   want.model[i].name);
  }
  ASSERT_TRUE(got->optimizer.has_value());
  ASSERT_EQ(got->optimizer->state.size(), 4u);
  for (const auto& [i, s] : want.optimizer->state) {
    const AdamWParamState& g = got->optimizer->state.at(i);
    EXPECT_EQ(g.step, 7);
    ExpectSameBits(g.exp_avg.values, s.exp_avg.values, "exp_avg");
    ExpectSameBits(g.exp_avg_sq.values, s.exp_avg_sq.values, "exp_avg_sq");
    EXPECT_EQ(g.exp_avg.shape, s.exp_avg.shape);
  }
  ASSERT_EQ(got->optimizer->param_groups.size(), 2u);
  const AdamWParamGroup& g = got->optimizer->param_groups[0];
  EXPECT_EQ(g.lr, 0.003);
  EXPECT_EQ(g.beta1, 0.9);
  EXPECT_EQ(g.beta2, 0.999);
  EXPECT_EQ(g.eps, 1e-8);
  EXPECT_EQ(g.weight_decay, 0.1);
  EXPECT_EQ(g.params, (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(got->optimizer->param_groups[1].weight_decay, 0);
}

TEST(TorchFileTest, WritesAFileAndReadsItBack) {
  testing::TempDir dir;
  TorchCheckpoint model_only = Sample();
  model_only.optimizer.reset();
  ASSERT_TRUE(WriteTorchFile(model_only, dir.File("m.pt")).ok());
  absl::StatusOr<TorchCheckpoint> got = ReadTorchFile(dir.File("m.pt"));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->model.size(), 4u);
  EXPECT_FALSE(got->optimizer.has_value());
  absl::StatusOr<TorchCheckpoint> missing = ReadTorchFile(dir.File("no.pt"));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
}

TEST(TorchFileTest, RefusesValuesThatDoNotFitTheirShape) {
  TorchCheckpoint c;
  c.model.push_back({"w", {{2, 2}, {1, 2, 3}}});
  absl::StatusOr<std::string> bytes = EncodeTorchFile(c);
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bytes.status().message(),
            "tensor 'w' has 3 values for a shape of 4 elements");
}

// A torch file laid out by hand as torch.save lays it out.
class HandMade {
 public:
  // A storage: its key, torch type and bytes.
  void Storage(const std::string& key, const std::string& bytes) {
    storages_[key] = bytes;
  }

  // _rebuild_tensor_v2 of a view of storage `key`.
  void Tensor(const std::string& type, const std::string& key, int64_t numel,
              int64_t offset, const std::vector<int64_t>& shape,
              const std::vector<int64_t>& stride) {
    p.Global("torch._utils", "_rebuild_tensor_v2");
    p.Mark();
    p.Mark();
    p.String("storage");
    p.Global("torch", type);
    p.String(key);
    p.String("cpu");
    p.Int(numel);
    p.Tuple();
    p.PersistentId();
    p.Int(offset);
    Ints(shape);
    Ints(stride);
    p.Bool(false);
    p.Global("collections", "OrderedDict");
    p.EmptyTuple();
    p.Reduce();
    p.Tuple();
    p.Reduce();
  }

  std::string Bytes() {
    std::string out;
    ZipWriter zip([&out](absl::string_view b) {
      out.append(b.data(), b.size());
      return absl::OkStatus();
    });
    EXPECT_TRUE(zip.Add("t/data.pkl", p.Finish()).ok());
    for (const auto& [key, bytes] : storages_) {
      EXPECT_TRUE(zip.Add("t/data/" + key, bytes).ok());
    }
    EXPECT_TRUE(zip.Add("t/version", "3\n").ok());
    EXPECT_TRUE(zip.Finish().ok());
    return out;
  }

  PickleWriter p;

 private:
  void Ints(const std::vector<int64_t>& v) {
    p.Mark();
    for (int64_t i : v) p.Int(i);
    p.Tuple();
  }

  std::map<std::string, std::string> storages_;
};

std::string Floats(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()),
                     v.size() * sizeof(float));
}

std::string Halves(const std::vector<uint16_t>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()),
                     v.size() * sizeof(uint16_t));
}

TEST(TorchFileTest, ReadsViewsAndHalfPrecisionStorages) {
  HandMade f;
  std::vector<float> twelve;
  for (int i = 0; i < 12; ++i) twelve.push_back(static_cast<float>(i));
  f.Storage("0", Floats(twelve));  // a 3 x 4 tensor
  // bf16 1.5, -2, 3.140625; fp16 1, -0.5, 65504, the smallest subnormal.
  f.Storage("1", Halves({0x3fc0, 0xc000, 0x4049}));
  f.Storage("2", Halves({0x3c00, 0xb800, 0x7bff, 0x0001}));
  f.p.EmptyDict();  // a plain state_dict
  f.p.Mark();
  f.p.String("transposed");
  f.Tensor("FloatStorage", "0", 12, 0, {4, 3}, {1, 4});
  f.p.String("corner");
  f.Tensor("FloatStorage", "0", 12, 6, {2, 2}, {4, 1});
  f.p.String("tied");  // the same view again: a tied weight
  f.Tensor("FloatStorage", "0", 12, 0, {4, 3}, {1, 4});
  f.p.String("bf16");
  f.Tensor("BFloat16Storage", "1", 3, 0, {3}, {1});
  f.p.String("fp16");
  f.Tensor("HalfStorage", "2", 4, 0, {4}, {1});
  f.p.SetItems();
  absl::StatusOr<TorchCheckpoint> got = ParseTorchFile(f.Bytes(), "v.pt");
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->model.size(), 5u);
  EXPECT_EQ(got->model[0].tensor.shape, (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(got->model[0].tensor.values,
            (std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
  EXPECT_EQ(got->model[1].tensor.values, (std::vector<float>{6, 7, 10, 11}));
  EXPECT_EQ(got->model[2].alias_of, 0);
  EXPECT_EQ(got->model[1].alias_of, -1);
  EXPECT_EQ(got->model[3].tensor.values,
            (std::vector<float>{1.5f, -2.0f, 3.140625f}));
  EXPECT_EQ(got->model[4].tensor.values,
            (std::vector<float>{1.0f, -0.5f, 65504.0f, std::ldexp(1.0f, -24)}));
  EXPECT_FALSE(got->optimizer.has_value());
}

TEST(TorchFileTest, HalfToFloatIsExactForEveryHalf) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const int sign = (h >> 15) != 0 ? -1 : 1;
    const int exponent = (h >> 10) & 0x1f;
    const int mantissa = h & 0x3ff;
    const float got = HalfToFloat(static_cast<uint16_t>(h));
    if (exponent == 31) {
      EXPECT_TRUE(mantissa == 0 ? std::isinf(got) : std::isnan(got)) << h;
      continue;
    }
    const double want = exponent == 0
                            ? sign * std::ldexp(mantissa, -24)
                            : sign * std::ldexp(1024 + mantissa, exponent - 25);
    ASSERT_EQ(got, static_cast<float>(want)) << h;
    ASSERT_EQ(std::signbit(got), sign < 0) << h;
  }
}

struct BadCase {
  const char* name;
  std::function<void(HandMade&)> build;
  absl::StatusCode code;
  const char* message;
};

TEST(TorchFileTest, RefusesWhatItDoesNotRead) {
  const std::string four = Floats({1, 2, 3, 4});
  const BadCase cases[] = {
      {"a float64 tensor",
       [&](HandMade& f) {
         f.Storage("0", four);
         f.p.String("w");
         f.Tensor("DoubleStorage", "0", 2, 0, {2}, {1});
       },
       absl::StatusCode::kInvalidArgument,
       "torch file 'b.pt': state_dict['w']: a float64 tensor "
       "(torch.DoubleStorage); only float32, bfloat16 and float16 are read"},
      {"a number for a tensor",
       [&](HandMade& f) {
         f.p.String("w");
         f.p.Int(3);
       },
       absl::StatusCode::kInvalidArgument,
       "torch file 'b.pt': state_dict['w']: an int where a tensor belongs"},
      {"a view past its storage",
       [&](HandMade& f) {
         f.Storage("0", four);
         f.p.String("w");
         f.Tensor("FloatStorage", "0", 4, 2, {3}, {1});
       },
       absl::StatusCode::kDataLoss,
       "state_dict['w']: the tensor reads element 4 of a storage of 4"},
      {"an expanded view",
       [&](HandMade& f) {
         f.Storage("0", four);
         f.p.String("w");
         f.Tensor("FloatStorage", "0", 4, 0, {1000000}, {0});
       },
       absl::StatusCode::kDataLoss,
       "state_dict['w']: a view of 1000000 elements of a storage of 4"},
      {"a missing storage",
       [&](HandMade& f) {
         f.p.String("w");
         f.Tensor("FloatStorage", "9", 4, 0, {4}, {1});
       },
       absl::StatusCode::kDataLoss,
       "torch file 'b.pt': state_dict['w']: its storage 't/data/9' is not in "
       "the archive"},
      {"a storage shorter than its id says",
       [&](HandMade& f) {
         f.Storage("0", four);
         f.p.String("w");
         f.Tensor("FloatStorage", "0", 5, 0, {4}, {1});
       },
       absl::StatusCode::kDataLoss,
       "state_dict['w']: storage '0' holds 16 bytes, not the 5 elements of 4 "
       "bytes its id records"},
  };
  for (const BadCase& c : cases) {
    HandMade f;
    f.p.EmptyDict();
    f.p.Mark();
    c.build(f);
    f.p.SetItems();
    absl::StatusOr<TorchCheckpoint> got = ParseTorchFile(f.Bytes(), "b.pt");
    ASSERT_FALSE(got.ok()) << c.name;
    EXPECT_EQ(got.status().code(), c.code) << c.name;
    EXPECT_THAT(got.status().message(), HasSubstr(c.message)) << c.name;
  }
}

TEST(TorchFileTest, RefusesAmsgradState) {
  HandMade f;
  f.Storage("0", Floats({1}));
  f.p.EmptyDict();
  f.p.Mark();
  f.p.String("model");
  f.p.EmptyDict();
  f.p.String("optimizer");
  f.p.EmptyDict();
  f.p.Mark();
  f.p.String("state");
  f.p.EmptyDict();
  f.p.Mark();
  f.p.Int(0);
  f.p.EmptyDict();
  f.p.Mark();
  f.p.String("max_exp_avg_sq");
  f.Tensor("FloatStorage", "0", 1, 0, {1}, {1});
  f.p.SetItems();
  f.p.SetItems();
  f.p.String("param_groups");
  f.p.EmptyList();
  f.p.SetItems();
  f.p.SetItems();
  absl::StatusOr<TorchCheckpoint> got = ParseTorchFile(f.Bytes(), "o.pt");
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(got.status().message(),
            "torch file 'o.pt': optimizer['state'][0]['max_exp_avg_sq']: "
            "amsgrad state, which zshard's AdamW has not");
}

TEST(TorchFileTest, RefusesAZipThatIsNotATorchFile) {
  std::string out;
  ZipWriter zip([&out](absl::string_view b) {
    out.append(b.data(), b.size());
    return absl::OkStatus();
  });
  ASSERT_TRUE(zip.Add("notes.txt", "hello").ok());
  ASSERT_TRUE(zip.Finish().ok());
  absl::StatusOr<TorchCheckpoint> got = ParseTorchFile(out, "n.zip");
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(got.status().message(),
            "'n.zip' is a zip archive but not a torch file (no "
            "ARCHIVE/data.pkl)");
}

TEST(TorchFileTest, RefusesAnUnknownOpcodeInItsPickle) {
  std::string out;
  ZipWriter zip([&out](absl::string_view b) {
    out.append(b.data(), b.size());
    return absl::OkStatus();
  });
  ASSERT_TRUE(zip.Add("a/data.pkl", std::string("\x80\x02\xff.", 4)).ok());
  ASSERT_TRUE(zip.Finish().ok());
  absl::StatusOr<TorchCheckpoint> got = ParseTorchFile(out, "u.pt");
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(got.status().message(),
            "torch file 'u.pt' data.pkl: unknown pickle opcode 0xff at byte 2");
}

}  // namespace
}  // namespace zshard::checkpoint
