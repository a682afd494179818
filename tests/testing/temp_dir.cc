// TempDir: mkdtemp and a recursive remove.

#include "tests/testing/temp_dir.h"

#include <cstdlib>
#include <filesystem>
#include <system_error>
#include <vector>

namespace zshard::testing {

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string pattern =
      std::string(base != nullptr && *base != '\0' ? base : "/tmp") +
      "/zshard-test-XXXXXX";
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  if (mkdtemp(buffer.data()) != nullptr) path_ = buffer.data();
}

TempDir::~TempDir() {
  // ZSHARD_KEEP_TEST_DIRS=1 keeps the logs of a failing run for reading.
  const char* keep = std::getenv("ZSHARD_KEEP_TEST_DIRS");
  if (path_.empty() || (keep != nullptr && std::string(keep) == "1")) return;
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::string TempDir::File(const std::string& name) const {
  return path_ + "/" + name;
}

}  // namespace zshard::testing
