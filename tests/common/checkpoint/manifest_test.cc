// manifest.json written atomically as proto JSON, read back, and validated
// against a model.
#include "common/checkpoint/manifest.h"

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

}  // namespace
}  // namespace zshard::checkpoint
