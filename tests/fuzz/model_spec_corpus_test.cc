// Replays the committed fuzz corpus through the fuzz target and checks the
// corpus' own expectations: valid_* files parse, bad_* files are rejected.
#include <dirent.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/file_io.h"
#include "common/plan/model_spec.h"
#include "gtest/gtest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

std::vector<std::string> CorpusFiles() {
  const char* root = std::getenv("ZSHARD_SOURCE_DIR");
  const std::string dir =
      std::string(root != nullptr ? root : ".") + "/tests/fuzz/corpus";
  std::vector<std::string> files;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] != '.') files.push_back(dir + "/" + e->d_name);
    }
    closedir(d);
  }
  std::sort(files.begin(), files.end());
  return files;
}

TEST(ModelSpecCorpusTest, ReplaysEveryFile) {
  const std::vector<std::string> files = CorpusFiles();
  ASSERT_GE(files.size(), 10u) << "corpus not found; is ZSHARD_SOURCE_DIR set?";
  int valid = 0, bad = 0;
  for (const std::string& path : files) {
    absl::StatusOr<std::string> text = zshard::ReadFile(path);
    ASSERT_TRUE(text.ok()) << text.status();
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(text->data()),
                           text->size());
    const std::string base = path.substr(path.rfind('/') + 1);
    absl::StatusOr<zshard::plan::ModelSpec> spec =
        zshard::plan::ParseModelSpec(*text);
    if (base.rfind("valid_", 0) == 0) {
      EXPECT_TRUE(spec.ok()) << base << ": " << spec.status();
      ++valid;
    } else if (base.rfind("bad_", 0) == 0) {
      EXPECT_FALSE(spec.ok()) << base;
      ++bad;
    }
  }
  EXPECT_GT(valid, 0);
  EXPECT_GT(bad, 0);
}

}  // namespace
