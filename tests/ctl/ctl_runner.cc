// The zshardctl runner of the end-to-end tests: fork, exec, wait.
#include "tests/ctl/ctl_runner.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>

#include "common/file_io.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace zshard::testing {
namespace {

std::string BinDir() {
  const char* dir = std::getenv("ZSHARD_BIN_DIR");
  return dir != nullptr ? dir : "build/bin";
}

}  // namespace

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/zshardctl_test_" + std::to_string(getpid()) +
         "_" + name;
}

CtlResult RunCtl(const std::vector<std::string>& args) {
  const std::string bin = BinDir() + "/zshardctl";
  const std::string out_path = TempPath("out");
  const std::string err_path = TempPath("err");
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(bin.c_str()));
  for (const std::string& a : args)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out < 0 || err < 0) _exit(127);
    dup2(out, 1);
    dup2(err, 2);
    execv(bin.c_str(), argv.data());
    _exit(127);
  }
  CtlResult r;
  int wstatus = 0;
  if (pid > 0 && waitpid(pid, &wstatus, 0) == pid && WIFEXITED(wstatus)) {
    r.status = WEXITSTATUS(wstatus);
  }
  r.out = ReadFile(out_path).value_or("<no stdout file>");
  r.err = ReadFile(err_path).value_or("<no stderr file>");
  return r;
}

std::string WriteSpec(const std::string& name, const std::string& text) {
  const std::string path = TempPath(name);
  EXPECT_TRUE(WriteFileAtomic(path, text).ok());
  return path;
}

void ExpectBadInput(const std::vector<BadCase>& cases) {
  for (const auto& [args, message] : cases) {
    CtlResult r = RunCtl(args);
    std::string shown;
    for (const std::string& a : args) shown += a + " ";
    EXPECT_EQ(r.status, 2) << shown;
    EXPECT_EQ(r.out, "") << shown;
    EXPECT_THAT(r.err, ::testing::HasSubstr(message)) << shown;
    ASSERT_FALSE(r.err.empty()) << shown;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << shown << r.err;
  }
}

}  // namespace zshard::testing
