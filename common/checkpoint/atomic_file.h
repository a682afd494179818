// A file written whole or not at all: the bytes go to PATH.tmp, which
// Commit() syncs and renames to PATH; an AtomicFile destroyed before
// Commit() removes PATH.tmp, leaving any earlier PATH as it was.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace zshard::checkpoint {

// Not thread-safe. Movable only by not being moved: create it in place.
class AtomicFile {
 public:
  AtomicFile() = default;
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // Creates PATH.tmp (truncating one left behind). PermissionDenied or
  // Internal naming the path when it cannot.
  absl::Status Open(const std::string& path);

  // Appends `bytes`. Requires Open.
  absl::Status Write(absl::string_view bytes);

  // Flushes, syncs and renames PATH.tmp to PATH, then syncs the directory.
  absl::Status Commit();

  // Bytes written so far.
  int64_t bytes() const { return bytes_; }

 private:
  std::string path_;
  std::string tmp_;
  std::FILE* file_ = nullptr;
  int64_t bytes_ = 0;
  bool committed_ = false;
};

}  // namespace zshard::checkpoint
