// Import of a torch file as a checkpoint directory and export back: the
// state comes back bit for bit, the directory is one a restore accepts
// (manifest valid for the model, files verified, every element covered),
// a checkpoint spread over several rank files is gathered, and each
// mismatch is refused in one line naming it.
#include "common/checkpoint/torch_convert.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/checkpoint/manifest.h"
#include "common/checkpoint/rank_file_io.h"
#include "common/checkpoint/torch_file.h"
#include "common/checkpoint/verify.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

namespace zshard::checkpoint {
namespace {

using ::testing::HasSubstr;

plan::ModelSpec Model() {
  plan::ModelSpec m;
  m.name = "tiny";
  auto add = [&m](const char* name, std::vector<int64_t> shape, bool nwd) {
    plan::ParamSpec p;
    p.name = name;
    p.shape = std::move(shape);
    p.no_weight_decay = nwd;
    m.params.push_back(p);
  };
  add("fc.weight", {3, 2}, false);
  add("fc.bias", {3}, true);
  add("out.weight", {2, 3}, false);
  add("gain", {1}, true);
  return m;
}

std::vector<float> Ramp(size_t n, float start) {
  std::vector<float> v;
  for (size_t i = 0; i < n; ++i) v.push_back(start + 0.125f * i);
  return v;
}

// The torch side of Model(): every param, and AdamW state in the decay
// split's order (fc.weight, out.weight; fc.bias, gain) after 5 steps.
TorchCheckpoint Torch(bool optimizer = true) {
  const plan::ModelSpec model = Model();
  TorchCheckpoint c;
  for (size_t i = 0; i < model.params.size(); ++i) {
    const plan::ParamSpec& p = model.params[i];
    c.model.push_back({p.name,
                       {p.name == "gain" ? std::vector<int64_t>{} : p.shape,
                        Ramp(p.numel(), static_cast<float>(i))}});
  }
  if (!optimizer) return c;
  AdamWStateDict& opt = c.optimizer.emplace();
  const int order[] = {0, 2, 1, 3};
  for (int j = 0; j < 4; ++j) {
    const plan::ParamSpec& p = model.params[order[j]];
    AdamWParamState& s = opt.state[j];
    s.step = 5;
    s.exp_avg = {p.shape, Ramp(p.numel(), -1.0f * j)};
    s.exp_avg_sq = {p.shape, Ramp(p.numel(), 0.5f + j)};
  }
  AdamWParamGroup decay;
  decay.weight_decay = 0.1;
  decay.params = {0, 1};
  AdamWParamGroup plain;
  plain.weight_decay = 0;
  plain.params = {2, 3};
  opt.param_groups = {decay, plain};
  return c;
}

void ExpectSameBits(const std::vector<float>& a, const std::vector<float>& b,
                    const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0)
      << what;
}

class TorchConvertTest : public ::testing::Test {
 protected:
  std::string Write(const TorchCheckpoint& c, const std::string& name) {
    const std::string path = dir_.File(name);
    EXPECT_TRUE(WriteTorchFile(c, path).ok());
    return path;
  }

  testing::TempDir dir_;
};

TEST_F(TorchConvertTest, ImportThenExportGivesTheSameState) {
  const TorchCheckpoint in = Torch();
  ImportOptions options;
  options.job = "tiny-job";
  absl::StatusOr<ImportSummary> imported = ImportTorchCheckpoint(
      Write(in, "in.pt"), Model(), dir_.File("ckpt"), options);
  ASSERT_TRUE(imported.ok()) << imported.status();
  EXPECT_EQ(imported->adam_step, 5);
  EXPECT_EQ(imported->step, 5);
  EXPECT_TRUE(imported->with_optimizer);

  // What --restore checks.
  absl::StatusOr<v1::CheckpointManifest> m = ReadManifest(dir_.File("ckpt"));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(ValidateManifest(*m, Model()).ok());
  EXPECT_EQ(m->job(), "tiny-job");
  EXPECT_EQ(m->world(), 1);
  EXPECT_EQ(m->instances(), 1);
  ASSERT_EQ(m->files_size(), 1);
  EXPECT_EQ(m->files(0).path(), "rank-00000.zsc");
  EXPECT_EQ(m->files(0).ranges_size(), 4);
  EXPECT_TRUE(
      VerifyFiles(dir_.File("ckpt"), {{m->files(0).path(), m->files(0).bytes(),
                                       m->files(0).checksum()}})
          .ok());
  absl::StatusOr<RankFileContents> rank =
      ReadRankFileContents(dir_.File("ckpt/rank-00000.zsc"));
  ASSERT_TRUE(rank.ok()) << rank.status();
  EXPECT_EQ(rank->adam_step, 5);
  // out.weight is the second param of the decay group: state index 1.
  ExpectSameBits(rank->ranges[2].exp_avg,
                 in.optimizer->state.at(1).exp_avg.values,
                 "out.weight exp_avg");
  ExpectSameBits(rank->ranges[1].exp_avg_sq,
                 in.optimizer->state.at(2).exp_avg_sq.values,
                 "fc.bias exp_avg_sq");

  ExportOptions eo;
  eo.adamw.lr = 0.002;
  eo.adamw.weight_decay = 0.1;
  absl::StatusOr<ExportSummary> exported = ExportTorchCheckpoint(
      dir_.File("ckpt"), Model(), dir_.File("out.pt"), eo);
  ASSERT_TRUE(exported.ok()) << exported.status();
  EXPECT_EQ(exported->param_groups, 2);
  absl::StatusOr<TorchCheckpoint> out = ReadTorchFile(dir_.File("out.pt"));
  ASSERT_TRUE(out.ok()) << out.status();
  for (size_t i = 0; i < in.model.size(); ++i) {
    EXPECT_EQ(out->model[i].name, in.model[i].name);
    ExpectSameBits(out->model[i].tensor.values, in.model[i].tensor.values,
                   in.model[i].name);
  }
  EXPECT_EQ(out->model[3].tensor.shape, std::vector<int64_t>{1});
  for (const auto& [i, s] : in.optimizer->state) {
    ExpectSameBits(out->optimizer->state.at(i).exp_avg.values, s.exp_avg.values,
                   "exp_avg");
    ExpectSameBits(out->optimizer->state.at(i).exp_avg_sq.values,
                   s.exp_avg_sq.values, "exp_avg_sq");
    EXPECT_EQ(out->optimizer->state.at(i).step, 5);
  }
  ASSERT_EQ(out->optimizer->param_groups.size(), 2u);
  EXPECT_EQ(out->optimizer->param_groups[0].params,
            (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(out->optimizer->param_groups[0].lr, 0.002);
  EXPECT_EQ(out->optimizer->param_groups[1].weight_decay, 0);
}

TEST_F(TorchConvertTest, WithoutAnOptimizerTheMomentsAreZero) {
  absl::StatusOr<ImportSummary> imported = ImportTorchCheckpoint(
      Write(Torch(false), "w.pt"), Model(), dir_.File("ckpt"));
  ASSERT_TRUE(imported.ok()) << imported.status();
  EXPECT_FALSE(imported->with_optimizer);
  EXPECT_EQ(imported->adam_step, 0);
  absl::StatusOr<RankFileContents> rank =
      ReadRankFileContents(dir_.File("ckpt/rank-00000.zsc"));
  ASSERT_TRUE(rank.ok());
  for (const RankFileRange& r : rank->ranges) {
    EXPECT_EQ(r.exp_avg, std::vector<float>(r.master.size(), 0.0f));
    EXPECT_EQ(r.exp_avg_sq, std::vector<float>(r.master.size(), 0.0f));
  }
  // With weight decay off the export has one group.
  absl::StatusOr<ExportSummary> exported =
      ExportTorchCheckpoint(dir_.File("ckpt"), Model(), dir_.File("out.pt"));
  ASSERT_TRUE(exported.ok()) << exported.status();
  EXPECT_EQ(exported->param_groups, 1);
}

// A model-parallel checkpoint (one param space per slot) is not exported.
TEST_F(TorchConvertTest, RefusesAModelParallelCheckpointInOneLine) {
  ASSERT_TRUE(ImportTorchCheckpoint(Write(Torch(false), "w.pt"), Model(),
                                    dir_.File("ckpt"))
                  .ok());
  absl::StatusOr<v1::CheckpointManifest> m = ReadManifest(dir_.File("ckpt"));
  ASSERT_TRUE(m.ok()) << m.status();
  m->set_tensor(2);
  ASSERT_TRUE(WriteManifest(*m).ok());
  absl::StatusOr<ExportSummary> exported =
      ExportTorchCheckpoint(dir_.File("ckpt"), Model(), dir_.File("out.pt"));
  EXPECT_EQ(exported.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(exported.status().message(),
            "checkpoint '" + dir_.File("ckpt") +
                "' is model-parallel (tensor 2, pipeline 1, context 1): torch "
                "export of a model-parallel checkpoint is not supported");
}

TEST_F(TorchConvertTest, RefusesMismatchesInOneLine) {
  struct Case {
    const char* name;
    TorchCheckpoint file;
    const char* message;
  };
  std::vector<Case> cases;
  {
    TorchCheckpoint c = Torch();
    c.model[1].name = "fc.bais";
    cases.push_back({"misspelt", c,
                     "param 'fc.bias' of the job's model is not in the torch "
                     "file"});
  }
  {
    TorchCheckpoint c = Torch();
    c.model.push_back({"running_mean", {{1}, {0}}});
    cases.push_back({"extra", c,
                     "holds 'running_mean', which is not a param of the "
                     "job's model"});
  }
  {
    TorchCheckpoint c = Torch();
    c.model[0].tensor.shape = {2, 3};
    cases.push_back({"shape", c,
                     "param 'fc.weight' has shape [2, 3] (6 elements) in the "
                     "torch file but [3, 2] (6) in the job's model"});
  }
  {
    TorchCheckpoint c = Torch();
    c.optimizer->state.at(3).step = 4;
    cases.push_back({"steps", c,
                     "optimizer state of param 'gain' has step 4 but others "
                     "5; zshard keeps one Adam step"});
  }
  {
    TorchCheckpoint c = Torch();
    c.optimizer->state.erase(2);
    cases.push_back({"partial", c,
                     "has no state for param 'fc.bias' (index 2) but has some "
                     "for others"});
  }
  {
    TorchCheckpoint c = Torch();
    c.optimizer->param_groups[0].amsgrad = true;
    cases.push_back({"amsgrad", c,
                     "the torch file's optimizer uses amsgrad, which zshard's "
                     "AdamW does not"});
  }
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string path = Write(cases[i].file, absl::StrCat(i, ".pt"));
    absl::StatusOr<ImportSummary> got =
        ImportTorchCheckpoint(path, Model(), dir_.File(absl::StrCat("out", i)));
    ASSERT_FALSE(got.ok()) << cases[i].name;
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(got.status().message(), HasSubstr(cases[i].message))
        << cases[i].name;
  }
}

TEST_F(TorchConvertTest, RefusesADirectoryThatHoldsFiles) {
  std::ofstream(dir_.File("here.txt")) << "x";
  absl::StatusOr<ImportSummary> got =
      ImportTorchCheckpoint(Write(Torch(), "in.pt"), Model(), dir_.path());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(got.status().message(), HasSubstr("is not empty"));
}

// A checkpoint as two ranks write it: fc.weight split between them.
class SplitCheckpoint : public TorchConvertTest {
 protected:
  // Writes the rank files and the manifest; `second_begin` is where rank
  // 1's part of fc.weight starts (2: exact; less: overlap; more: a gap).
  void Make(int64_t second_begin, int expert_rank = 0) {
    const plan::ModelSpec model = Model();
    RankFileContents r0;
    r0.step = 9;
    r0.adam_step = 8;
    RankFileContents r1 = r0;
    r1.rank = 1;
    auto range = [](int p, int64_t b, int64_t e) {
      RankFileRange r;
      r.param_index = p;
      r.begin = b;
      r.end = e;
      r.master = Ramp(e - b, 100.0f * p + b);
      r.exp_avg = Ramp(e - b, -100.0f * p - b);
      r.exp_avg_sq = Ramp(e - b, 1000.0f * p + b);
      return r;
    };
    r0.ranges = {range(0, 0, 2), range(1, 0, 3)};
    r1.ranges = {range(0, second_begin, 6), range(2, 0, 6), range(3, 0, 1)};
    r1.ranges[1].expert_rank = expert_rank;
    const std::string ckpt = dir_.File("step-00000009");
    std::filesystem::create_directories(ckpt);
    v1::CheckpointManifest m;
    m.set_step(9);
    m.set_adam_step(8);
    m.set_world(2);
    m.set_instances(1);
    m.set_dir(ckpt);
    for (const RankFileContents* r : {&r0, &r1}) {
      absl::StatusOr<WrittenRankFile> w = WriteRankFileContents(*r, ckpt);
      ASSERT_TRUE(w.ok()) << w.status();
      v1::CheckpointFile* f = m.add_files();
      f->set_path(w->name);
      f->set_rank(r->rank);
      f->set_bytes(w->bytes);
      f->set_checksum(w->checksum);
      for (const RankFileRange& x : r->ranges) {
        v1::ParamRange* pr = f->add_ranges();
        pr->set_param_index(x.param_index);
        pr->set_expert_rank(x.expert_rank);
        pr->set_begin(x.begin);
        pr->set_end(x.end);
      }
    }
    for (const plan::ParamSpec& p : model.params) {
      m.add_param_names(p.name);
      m.add_param_numels(p.numel());
    }
    ASSERT_TRUE(WriteManifest(m).ok());
  }

  absl::StatusOr<ExportSummary> Export() {
    return ExportTorchCheckpoint(dir_.File("step-00000009"), Model(),
                                 dir_.File("out.pt"));
  }
};

TEST_F(SplitCheckpoint, GathersRangesFromEveryFile) {
  Make(2);
  absl::StatusOr<ExportSummary> exported = Export();
  ASSERT_TRUE(exported.ok()) << exported.status();
  EXPECT_EQ(exported->step, 9);
  EXPECT_EQ(exported->adam_step, 8);
  absl::StatusOr<TorchCheckpoint> out = ReadTorchFile(dir_.File("out.pt"));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->model[0].tensor.values,
            (std::vector<float>{0, 0.125f, 2, 2.125f, 2.25f, 2.375f}));
  EXPECT_EQ(out->optimizer->state.at(0).exp_avg.values,
            (std::vector<float>{0, 0.125f, -2, -1.875f, -1.75f, -1.625f}));
  EXPECT_EQ(out->optimizer->state.at(0).step, 8);
}

TEST_F(SplitCheckpoint, RefusesOverlapsGapsAndExpertRanks) {
  Make(1);
  EXPECT_EQ(Export().status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(Export().status().message(),
              HasSubstr("param 'fc.weight' elements from 1 are in two files"));
  Make(3);
  EXPECT_THAT(Export().status().message(),
              HasSubstr("param 'fc.weight' element 2 is in no file"));
  Make(2, /*expert_rank=*/1);
  EXPECT_EQ(Export().status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Export().status().message(),
              HasSubstr("holds expert rank 1 of param 'out.weight'"));
}

TEST_F(SplitCheckpoint, RefusesAnotherModel) {
  Make(2);
  plan::ModelSpec other = Model();
  other.params[2].name = "head.weight";
  absl::StatusOr<ExportSummary> got = ExportTorchCheckpoint(
      dir_.File("step-00000009"), other, dir_.File("out.pt"));
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(got.status().message(),
              HasSubstr("does not fit the job's model: param 2 is "
                        "'out.weight' in the checkpoint but 'head.weight'"));
}

TEST_F(SplitCheckpoint, RefusesADamagedFile) {
  Make(2);
  {
    std::fstream f(dir_.File("step-00000009/rank-00001.zsc"),
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(200);
    f.put('\x55');
  }
  absl::StatusOr<ExportSummary> got = Export();
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(got.status().message(), HasSubstr("rank-00001.zsc"));
  EXPECT_THAT(Export().status().message(), HasSubstr("checksum mismatch"));
}

}  // namespace
}  // namespace zshard::checkpoint
