// Tests of the test helpers themselves: processes, log scanning, temp dirs.

#include <signal.h>

#include <fstream>

#include "gtest/gtest.h"
#include "tests/testing/free_port.h"
#include "tests/testing/log_scan.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/wait_for.h"

namespace zshard::testing {
namespace {

TEST(SubprocessTest, CapturesOutputAndExitStatus) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  Subprocess::Options options;
  options.argv = {"/bin/sh", "-c", "echo listening on 127.0.0.1:4567; exit 3"};
  options.stdout_path = dir.File("out.log");
  auto child = Subprocess::Start(options);
  ASSERT_TRUE(child.ok()) << child.status();
  EXPECT_EQ((*child)->Wait(5000), 3);
  EXPECT_EQ(FindBoundPort(dir.File("out.log")), 4567);
  EXPECT_TRUE(LogContains(dir.File("out.log"), "listening"));
}

TEST(SubprocessTest, KillReportsSignal) {
  Subprocess::Options options;
  options.argv = {"/bin/sleep", "30"};
  auto child = Subprocess::Start(options);
  ASSERT_TRUE(child.ok());
  EXPECT_TRUE((*child)->Running());
  (*child)->Signal(SIGKILL);
  EXPECT_EQ((*child)->Wait(5000), 128 + SIGKILL);
  EXPECT_FALSE((*child)->Running());
}

TEST(SubprocessTest, MissingExecutableExits127) {
  Subprocess::Options options;
  options.argv = {"/nonexistent/zshard-binary"};
  auto child = Subprocess::Start(options);
  ASSERT_TRUE(child.ok());
  EXPECT_EQ((*child)->Wait(5000), 127);
}

TEST(LogScanTest, NoPortUntilMarkerLine) {
  TempDir dir;
  std::string path = dir.File("log");
  EXPECT_FALSE(FindBoundPort(path).has_value());
  { std::ofstream(path) << "starting on 0.0.0.0:0\n"; }
  EXPECT_FALSE(FindBoundPort(path).has_value());
  {
    std::ofstream(path, std::ios::app)
        << "{\"msg\":\"coordinator listening\",\"address\":\"[::]:39001\"}\n";
  }
  EXPECT_EQ(FindBoundPort(path), 39001);
}

TEST(WaitForTest, TimesOutOnFalseCondition) {
  EXPECT_FALSE(WaitFor([] { return false; }, 30, 5));
  int calls = 0;
  EXPECT_TRUE(WaitFor([&] { return ++calls == 3; }, 5000, 1));
}

TEST(FreePortTest, PicksAPort) {
  int port = PickFreePort();
  EXPECT_GT(port, 0);
  EXPECT_LT(port, 65536);
}

}  // namespace
}  // namespace zshard::testing
