// Rank checkpoint files: a round trip of every owned range, the manifest
// entry's bytes and checksum, and the failures a reader must report:
// corruption and truncation (DataLoss), a missing file or range (NotFound).
#include "client/worker/checkpoint/checkpoint_file.h"

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/worker/reshard/state_pattern.h"

namespace zshard::checkpoint {
namespace {

using ::testing::HasSubstr;
using zshard::testing::PatternValue;
using zshard::testing::StateKind;

class CheckpointFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(
        ::testing::TempDir(), "/ckpt_",
        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
  }

  // Rank 1 of W=2 with the pattern state, written as step 7, Adam step 6.
  RankFileInfo WriteRank1(plan::DType dtype = plan::DType::kBf16) {
    const plan::ModelSpec model = testing::PatternModel(dtype);
    const plan::Plan plan = testing::PatternPlan(model, 2, 1);
    auto buffers = testing::FreshBuffers(model, plan, 1);
    testing::FillPattern(*buffers);
    absl::StatusOr<RankFileInfo> file =
        WriteRankFile(*buffers, StepDir(dir_, 7), 1, 7, 6);
    EXPECT_TRUE(file.ok()) << file.status();
    return *file;
  }

  std::string Path() const {
    return absl::StrCat(StepDir(dir_, 7), "/", RankFileName(1));
  }

  std::string dir_;
};

TEST(CheckpointNamesTest, RankFileAndStepDir) {
  EXPECT_EQ(RankFileName(3), "rank-00003.zsc");
  EXPECT_EQ(StepDir("/ck", 10), "/ck/step-00000010");
}

TEST_F(CheckpointFileTest, RoundTripsEveryRange) {
  for (plan::DType dtype : {plan::DType::kBf16, plan::DType::kFp32}) {
    SCOPED_TRACE(plan::DTypeName(dtype));
    const RankFileInfo file = WriteRank1(dtype);
    EXPECT_EQ(file.path, "rank-00001.zsc");
    EXPECT_EQ(file.rank, 1);
    EXPECT_EQ(file.bytes, std::filesystem::file_size(Path()));
    EXPECT_EQ(file.checksum.size(), 16u);
    EXPECT_FALSE(std::filesystem::exists(Path() + ".tmp"));
    ASSERT_GT(file.ranges.size(), 1u);

    absl::StatusOr<RankFileReader> reader = RankFileReader::Open(Path());
    ASSERT_TRUE(reader.ok()) << reader.status();
    EXPECT_EQ(reader->step(), 7);
    EXPECT_EQ(reader->adam_step(), 6);
    EXPECT_EQ(reader->rank(), 1);
    ASSERT_EQ(reader->ranges().size(), file.ranges.size());
    int64_t elements = 0;
    for (const plan::CheckpointFragment& r : file.ranges) {
      const int64_t n = r.end - r.begin;
      elements += n;
      std::vector<float> master(n), m(n), v(n);
      ASSERT_TRUE(reader
                      ->Read(r.param_index, r.expert_rank, r.begin, r.end,
                             master.data(), m.data(), v.data())
                      .ok());
      for (int64_t k = 0; k < n; ++k) {
        const int64_t j = r.begin + k;
        ASSERT_EQ(master[k],
                  PatternValue(r.param_index, j, StateKind::kMaster));
        ASSERT_EQ(m[k], PatternValue(r.param_index, j, StateKind::kExpAvg));
        ASSERT_EQ(v[k], PatternValue(r.param_index, j, StateKind::kExpAvgSq));
      }
      // A sub-range reads the same values.
      if (n >= 3) {
        float one[3];
        ASSERT_TRUE(reader
                        ->Read(r.param_index, 0, r.begin + 1, r.begin + 2, one,
                               one + 1, one + 2)
                        .ok());
        EXPECT_EQ(one[0], master[1]);
        EXPECT_EQ(one[2], v[1]);
      }
    }
    // Padding is not written: the header, the table, 12 bytes per element
    // and the trailer.
    EXPECT_EQ(file.bytes, 40 + 32 * static_cast<int64_t>(file.ranges.size()) +
                              12 * elements + 8);
    std::filesystem::remove_all(dir_);
  }
}

TEST_F(CheckpointFileTest, CorruptionIsDataLoss) {
  const RankFileInfo file = WriteRank1();
  {
    std::fstream f(Path(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(file.bytes / 2);
    char c = 0;
    f.read(&c, 1);
    c ^= 0x10;
    f.seekp(file.bytes / 2);
    f.write(&c, 1);
  }
  absl::StatusOr<RankFileReader> reader = RankFileReader::Open(Path());
  EXPECT_EQ(reader.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(reader.status().message(), HasSubstr("rank-00001.zsc"));
}

TEST_F(CheckpointFileTest, TruncationIsDataLoss) {
  const RankFileInfo file = WriteRank1();
  for (int64_t size : {file.bytes - 1, file.bytes - 100, int64_t{20}}) {
    std::filesystem::resize_file(Path(), size);
    absl::StatusOr<RankFileReader> reader = RankFileReader::Open(Path());
    EXPECT_EQ(reader.status().code(), absl::StatusCode::kDataLoss)
        << size << ": " << reader.status();
  }
}

TEST_F(CheckpointFileTest, MissingFileOrRangeIsNotFound) {
  EXPECT_EQ(RankFileReader::Open(dir_ + "/nothing.zsc").status().code(),
            absl::StatusCode::kNotFound);
  const RankFileInfo file = WriteRank1();
  absl::StatusOr<RankFileReader> reader = RankFileReader::Open(Path());
  ASSERT_TRUE(reader.ok()) << reader.status();
  const plan::CheckpointFragment& r = file.ranges.at(0);
  float x[3];
  // One element past the range, an unknown param, another expert rank.
  EXPECT_EQ(
      reader->Read(r.param_index, 0, r.end - 1, r.end + 1, x, x, x).code(),
      absl::StatusCode::kNotFound);
  EXPECT_EQ(reader->Read(99, 0, 0, 1, x, x, x).code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(
      reader->Read(r.param_index, 1, r.begin, r.begin + 1, x, x, x).code(),
      absl::StatusCode::kNotFound);
}

TEST_F(CheckpointFileTest, UnwritableDirectoryIsAnError) {
  std::filesystem::create_directories(dir_);
  std::ofstream(dir_ + "/file") << "x";
  const plan::ModelSpec model = testing::PatternModel();
  const plan::Plan plan = testing::PatternPlan(model, 1, 1);
  auto buffers = testing::FreshBuffers(model, plan, 0);
  // A path below a regular file cannot be created.
  absl::StatusOr<RankFileInfo> file =
      WriteRankFile(*buffers, dir_ + "/file/step", 0, 1, 1);
  EXPECT_FALSE(file.ok());
  EXPECT_THAT(file.status().message(), HasSubstr(dir_ + "/file/step"));
}

}  // namespace
}  // namespace zshard::checkpoint
