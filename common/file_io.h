// Whole-file reads and atomic whole-file writes, with statuses that name
// the path.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace zshard {

// Reads the whole file. NotFound when it does not exist, InvalidArgument
// when it cannot be read (a directory, no permission).
absl::StatusOr<std::string> ReadFile(absl::string_view path);

// Writes `contents` to `path` through a temporary file and rename, so a
// reader never sees a partial file.
absl::Status WriteFileAtomic(absl::string_view path,
                             absl::string_view contents);

// Makes sure `path` is a directory this process can create files in:
// creates it (and its parents) when missing, then creates and removes a
// probe file. FailedPrecondition naming the path and the reason otherwise.
absl::Status EnsureWritableDir(absl::string_view path);

}  // namespace zshard
