// Verification of a checkpoint's files against its manifest, before anyone
// restores from it: every file present, of the recorded size, with the
// recorded FNV-1a 64 checksum (the same digest the rank file's trailer holds).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace zshard::checkpoint {

// A rank file as its manifest records it.
struct ExpectedFile {
  std::string path;  // relative to the checkpoint's directory
  int64_t bytes = 0;
  std::string checksum;  // hex FNV-1a 64, as the writer reports it
};

// Checks every file of `files`, found relative to `dir` (the checkpoint's
// directory as it is now, which may differ from the manifest's dir when the
// checkpoint was moved). Reads each file once, streaming. NotFound naming
// the file when one is missing; DataLoss naming the file when its size or
// checksum differs from the manifest ("truncated or corrupt").
absl::Status VerifyFiles(const std::string& dir,
                         const std::vector<ExpectedFile>& files);

}  // namespace zshard::checkpoint
