// A temporary directory that is removed with everything in it when the
// object goes away (kept when ZSHARD_KEEP_TEST_DIRS=1, to read the logs of
// a failed run).
#pragma once

#include <string>

namespace zshard::testing {

// Creates a fresh directory under $TMPDIR (or /tmp). Not thread-safe.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  // The directory's absolute path; empty if it could not be created.
  const std::string& path() const { return path_; }
  // path() + "/" + name.
  std::string File(const std::string& name) const;

 private:
  std::string path_;
};

}  // namespace zshard::testing
