// The --dump-master format: index-<rank>.json entries and raw float32 files
// (a contract read by independent checks), and the reader's checks.
#include "client/worker/engine/master_dump.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "client/worker/engine/synthetic_workload.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/worker/engine/buffer_readback.h"

namespace zshard::engine {
namespace {

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class MasterDumpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_.name = "m";
    for (const int64_t n : {1000, 300, 5000, 7}) {
      plan::ParamSpec p;
      p.name = absl::StrCat("layer.", model_.params.size());
      p.shape = {n};
      model_.params.push_back(p);
    }
    plan::PlanOptions po;
    po.world = 4;
    po.layout.bucket_size = 4000;
    plan_ = *plan::MakePlan(model_, po);
    dir_ = absl::StrCat(
        ::testing::TempDir(), "/dump_",
        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
  }

  plan::ModelSpec model_;
  plan::Plan plan_;
  std::string dir_;
};

TEST_F(MasterDumpTest, WritesIndexAndRawFloatsOfTheWorkedExample) {
  SyntheticWorkload workload(model_, {});
  auto buffers = EngineBuffers::Create(model_, plan_, 1, workload);
  ASSERT_TRUE(buffers.ok());
  ASSERT_TRUE(DumpMasters(**buffers, dir_).ok());
  const nlohmann::json index =
      nlohmann::json::parse(Read(dir_ + "/index-1.json"));
  // The worked example of docs/design.md section 4: rank 1 owns p2
  // [1216,2496) and p0 [32,384).
  ASSERT_EQ(index.size(), 2u);
  EXPECT_EQ(index[0]["param"], "layer.2");
  EXPECT_EQ(index[0]["param_start"], 1216);
  EXPECT_EQ(index[0]["param_end"], 2496);
  EXPECT_EQ(index[1]["param"], "layer.0");
  EXPECT_EQ(index[1]["param_start"], 32);
  EXPECT_EQ(index[1]["param_end"], 384);
  const std::string raw =
      Read(dir_ + "/" + index[0]["file"].get<std::string>());
  ASSERT_EQ(raw.size(), (2496 - 1216) * 4u);
  float first;
  std::memcpy(&first, raw.data(), 4);
  EXPECT_EQ(first, zshard::testing::Param(**buffers, 2)[1216]);
}

TEST_F(MasterDumpTest, LoadAssemblesEveryRankAndReportsGaps) {
  SyntheticWorkload workload(model_, {});
  for (int r = 0; r < 3; ++r) {
    auto buffers = EngineBuffers::Create(model_, plan_, r, workload);
    ASSERT_TRUE(buffers.ok());
    ASSERT_TRUE(DumpMasters(**buffers, dir_).ok());
  }
  auto missing = LoadMasters(dir_, model_);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(missing.status().message().find("missing"), std::string::npos);
  auto buffers = EngineBuffers::Create(model_, plan_, 3, workload);
  ASSERT_TRUE(DumpMasters(**buffers, dir_).ok());
  auto all = LoadMasters(dir_, model_);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->at("layer.2")[4999],
            zshard::testing::Param(**buffers, 2)[4999]);
}

}  // namespace
}  // namespace zshard::engine
