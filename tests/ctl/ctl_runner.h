// Runs the real zshardctl binary (from $ZSHARD_BIN_DIR, default build/bin)
// with stdout and stderr captured, for the end-to-end zshardctl tests.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace zshard::testing {

struct CtlResult {
  int status = -1;  // the exit status; -1 when it did not exit normally
  std::string out;
  std::string err;
};

// Runs zshardctl with `args` and waits for it.
CtlResult RunCtl(const std::vector<std::string>& args);

// A path under the test's temporary directory, unique to this process.
std::string TempPath(const std::string& name);

// Writes `text` to TempPath(name) and returns the path.
std::string WriteSpec(const std::string& name, const std::string& text);

// A command line and a part of the one line it must print on stderr.
using BadCase = std::pair<std::vector<std::string>, std::string>;

// Expects each case to exit with status 2, print nothing on stdout and
// exactly one line on stderr containing its message.
void ExpectBadInput(const std::vector<BadCase>& cases);

}  // namespace zshard::testing
