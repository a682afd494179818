// What zshard-coordinator refuses at start, with exit status 2 and one line
// on stderr, before any worker is involved: a state dir another coordinator
// holds (which serves on, undisturbed), a --restore checkpoint with a damaged
// or missing rank file, and a job whose checkpoint dir cannot be used.
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/checkpoint/manifest.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "tests/server/test_checkpoint.h"
#include "tests/server/test_job.h"
#include "tests/testing/log_scan.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/temp_dir.h"
#include "zshard/v1/dashboard_service.grpc.pb.h"

namespace zshard::server {
namespace {

using ::testing::HasSubstr;
using zshard::testing::Subprocess;

class CoordinatorStartTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* bin_dir = std::getenv("ZSHARD_BIN_DIR");
    if (bin_dir == nullptr) GTEST_SKIP() << "ZSHARD_BIN_DIR is not set";
    bin_ = std::string(bin_dir) + "/zshard-coordinator";
    std::ofstream(tmp_.File("job.json")) << testing::TestJobJson();
  }

  std::unique_ptr<Subprocess> Start(const std::vector<std::string>& extra,
                                    const std::string& name) {
    Subprocess::Options o;
    o.argv = {bin_,          "--job",       tmp_.File("job.json"), "--listen",
              "127.0.0.1:0", "--state-dir", tmp_.File("state")};
    o.argv.insert(o.argv.end(), extra.begin(), extra.end());
    o.stdout_path = tmp_.File(name + ".out");
    o.stderr_path = tmp_.File(name + ".err");
    return Subprocess::Start(o).value();
  }

  // Runs a coordinator that must refuse to start: its exit status and
  // its stderr.
  std::pair<int, std::string> RunRefused(const std::vector<std::string>& extra,
                                         const std::string& name = "refused") {
    auto p = Start(extra, name);
    std::optional<int> code = p->Wait(20000);
    return {code.value_or(-1),
            zshard::testing::ReadLog(tmp_.File(name + ".err"))};
  }

  static int Lines(const std::string& text) {
    return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
  }

  zshard::testing::TempDir tmp_;
  std::string bin_;
};

TEST_F(CoordinatorStartTest, SecondCoordinatorOnAHeldStateDirExits2) {
  auto first = Start({}, "first");
  std::optional<int> port =
      zshard::testing::WaitForBoundPort(tmp_.File("first.out"), 20000);
  ASSERT_TRUE(port.has_value())
      << zshard::testing::ReadLog(tmp_.File("first.err"));

  auto [code, err] = RunRefused({});
  EXPECT_EQ(code, 2);
  EXPECT_THAT(err, HasSubstr("held by another coordinator (pid " +
                             std::to_string(first->pid()) + ")"));
  EXPECT_EQ(Lines(err), 1) << err;

  // The first one serves on.
  ASSERT_TRUE(first->Running());
  auto stub = v1::DashboardService::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(*port),
                          grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::GetClusterStatusRequest req;
  v1::GetClusterStatusResponse resp;
  grpc::Status s = stub->GetClusterStatus(&ctx, req, &resp);
  EXPECT_TRUE(s.ok()) << s.error_message();

  // Once the holder is gone (even by SIGKILL) the directory is free.
  first->Kill();
  auto again = Start({}, "again");
  EXPECT_TRUE(zshard::testing::WaitForBoundPort(tmp_.File("again.out"), 20000)
                  .has_value())
      << zshard::testing::ReadLog(tmp_.File("again.err"));
}

TEST_F(CoordinatorStartTest, DamagedRestoreCheckpointExits2NamingTheFile) {
  const std::string ckpt = tmp_.File("ckpt");
  ASSERT_EQ(mkdir(ckpt.c_str(), 0700), 0);
  ASSERT_TRUE(checkpoint::WriteManifest(testing::GoodManifest(ckpt)).ok());
  {
    std::fstream f(ckpt + "/rank-00000.zsc",
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(5);
    f.put('!');
  }
  auto [code, err] = RunRefused({"--restore", ckpt});
  EXPECT_EQ(code, 2);
  EXPECT_THAT(err, HasSubstr("rank-00000.zsc: checksum mismatch"));
  EXPECT_EQ(Lines(err), 1) << err;
  // Nothing was started: the state dir holds no job.
  struct stat st;
  EXPECT_NE(stat(tmp_.File("state/coordinator.db").c_str(), &st), 0);
}

TEST_F(CoordinatorStartTest, MissingRankFileExits2NamingTheFile) {
  const std::string ckpt = tmp_.File("ckpt");
  ASSERT_EQ(mkdir(ckpt.c_str(), 0700), 0);
  ASSERT_TRUE(checkpoint::WriteManifest(testing::GoodManifest(ckpt)).ok());
  ASSERT_EQ(std::remove((ckpt + "/rank-00000.zsc").c_str()), 0);
  auto [code, err] = RunRefused({"--restore", ckpt});
  EXPECT_EQ(code, 2);
  EXPECT_THAT(err, HasSubstr("rank-00000.zsc is missing"));
  EXPECT_EQ(Lines(err), 1) << err;
}

TEST_F(CoordinatorStartTest, UnusableCheckpointDirExits2) {
  // A regular file where the checkpoint dir's parent should be: no one,
  // not even root, can create the directory.
  std::ofstream(tmp_.File("blocker")) << "x";
  std::string job = testing::TestJobJson();
  job.insert(job.rfind('}'), absl::StrCat(R"(, "checkpoint": {"dir": ")",
                                          tmp_.File("blocker/ckpt"),
                                          R"(", "every_steps": 10})"));
  std::ofstream(tmp_.File("job.json")) << job;
  auto [code, err] = RunRefused({});
  EXPECT_EQ(code, 2);
  EXPECT_THAT(err, HasSubstr("checkpoint dir is unusable"));
  EXPECT_THAT(err, HasSubstr("blocker/ckpt"));
  EXPECT_EQ(Lines(err), 1) << err;
}

}  // namespace
}  // namespace zshard::server
