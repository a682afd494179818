// manifest.json written atomically as proto JSON, read back, and validated
// against a model.
#include "common/checkpoint/manifest.h"

#include <string>
#include <vector>

#include "common/file_io.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

namespace zshard::checkpoint {
namespace {

using ::testing::HasSubstr;

plan::ModelSpec Model() {
  plan::ModelSpec m;
  m.name = "tiny";
  plan::ParamSpec a;
  a.name = "a";
  a.shape = {10};
  plan::ParamSpec b;
  b.name = "b";
  b.shape = {4, 5};
  m.params = {a, b};
  return m;
}

v1::CheckpointManifest Manifest(const std::string& dir) {
  v1::CheckpointManifest m;
  m.set_job("demo");
  m.set_step(7);
  m.set_adam_step(6);
  m.set_dir(dir);
  m.add_param_names("a");
  m.add_param_numels(10);
  m.add_param_names("b");
  m.add_param_numels(20);
  v1::CheckpointFile* f = m.add_files();
  f->set_path("rank-00000.zsc");
  f->set_checksum("0123456789abcdef");
  v1::ParamRange* r = f->add_ranges();
  r->set_param_index(1);
  r->set_begin(0);
  r->set_end(20);
  return m;
}

TEST(ManifestTest, RoundTripsThroughJson) {
  zshard::testing::TempDir tmp;
  v1::CheckpointManifest m = Manifest(tmp.path());
  ASSERT_TRUE(WriteManifest(m).ok());
  auto text = ReadFile(ManifestPath(tmp.path()));
  ASSERT_TRUE(text.ok());
  EXPECT_THAT(*text, HasSubstr("\"param_names\""));
  auto back = ReadManifest(tmp.path());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->SerializeAsString(), m.SerializeAsString());
  // Rewriting replaces the file whole.
  m.set_step(8);
  ASSERT_TRUE(WriteManifest(m).ok());
  EXPECT_EQ(ReadManifest(tmp.path())->step(), 8);
}

TEST(ManifestTest, MissingAndBrokenManifests) {
  zshard::testing::TempDir tmp;
  EXPECT_EQ(ReadManifest(tmp.path()).status().code(),
            absl::StatusCode::kNotFound);
  ASSERT_TRUE(WriteFileAtomic(ManifestPath(tmp.path()), "[1, 2]").ok());
  EXPECT_EQ(ReadManifest(tmp.path()).status().code(),
            absl::StatusCode::kDataLoss);
  v1::CheckpointManifest no_dir = Manifest("");
  EXPECT_EQ(WriteManifest(no_dir).code(), absl::StatusCode::kInvalidArgument);
}

TEST(ManifestTest, ValidationNamesTheFirstDifference) {
  plan::ModelSpec model = Model();
  v1::CheckpointManifest m = Manifest("/x");
  EXPECT_TRUE(ValidateManifest(m, model).ok());
  v1::CheckpointManifest bad = m;
  bad.set_param_names(0, "z");
  EXPECT_THAT(std::string(ValidateManifest(bad, model).message()),
              HasSubstr("param 0 is 'z' in the checkpoint but 'a'"));
  bad = m;
  bad.set_param_numels(1, 21);
  EXPECT_THAT(std::string(ValidateManifest(bad, model).message()),
              HasSubstr("param 'b' has 21 elements"));
  bad = m;
  bad.add_param_names("c");
  bad.add_param_numels(3);
  EXPECT_THAT(std::string(ValidateManifest(bad, model).message()),
              HasSubstr("3 params but the job's model has 2"));
  bad = m;
  bad.mutable_files(0)->set_path("/etc/passwd");
  EXPECT_EQ(ValidateManifest(bad, model).code(),
            absl::StatusCode::kInvalidArgument);
  bad = m;
  bad.mutable_files(0)->mutable_ranges(0)->set_end(21);
  EXPECT_THAT(std::string(ValidateManifest(bad, model).message()),
              HasSubstr("outside the model"));
  bad = m;
  bad.clear_files();
  EXPECT_THAT(std::string(ValidateManifest(bad, model).message()),
              HasSubstr("no files"));
}

TEST(ManifestTest, ModelParallelManifestsAreCheckedPerSlot) {
  // T = 2: slot 0 is Model(), slot 1 holds "c" alone.
  plan::ModelSpec s1;
  plan::ParamSpec c;
  c.name = "c";
  c.shape = {6};
  s1.params = {c};
  const std::vector<plan::ModelSpec> slots = {Model(), s1};
  const plan::ParallelSizes sizes{2, 1, 1};
  v1::CheckpointManifest m = Manifest("/x");
  m.set_tensor(2);
  m.set_pipeline(1);
  m.set_context(1);
  m.add_slot_params(2);
  m.add_slot_params(1);
  m.add_param_names("c");
  m.add_param_numels(6);
  v1::CheckpointFile* f = m.add_files();
  f->set_path("slot-1/rank-00000.zsc");
  f->set_slot(1);
  v1::ParamRange* r = f->add_ranges();
  r->set_param_index(0);
  r->set_begin(0);
  r->set_end(6);
  EXPECT_TRUE(ValidateSlotsManifest(m, sizes, slots).ok());
  // Another context size restores; another tensor or pipeline size does
  // not, in one line naming both shapes.
  EXPECT_TRUE(ValidateSlotsManifest(m, {2, 1, 2}, slots).ok());
  EXPECT_EQ(std::string(ValidateSlotsManifest(m, {1, 2, 1}, slots).message()),
            "the checkpoint was written with tensor 2, pipeline 1, context 1; "
            "this job has tensor 1, pipeline 2, context 1: restore needs the "
            "same tensor and pipeline sizes");
  // A model-parallel manifest fits no single model.
  EXPECT_THAT(std::string(ValidateManifest(m, Model()).message()),
              HasSubstr("written with tensor 2"));
  // A range is checked against its own slot's model.
  v1::CheckpointManifest bad = m;
  bad.mutable_files(1)->mutable_ranges(0)->set_end(7);
  EXPECT_THAT(std::string(ValidateSlotsManifest(bad, sizes, slots).message()),
              HasSubstr("outside the model"));
  bad = m;
  bad.set_slot_params(1, 2);
  EXPECT_THAT(std::string(ValidateSlotsManifest(bad, sizes, slots).message()),
              HasSubstr("slot (tp 1, pp 0) has 2 params"));
  bad = m;
  bad.mutable_files(1)->set_slot(2);
  EXPECT_THAT(std::string(ValidateSlotsManifest(bad, sizes, slots).message()),
              HasSubstr("has slot 2"));
}

}  // namespace
}  // namespace zshard::checkpoint
