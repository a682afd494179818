// Verification of a checkpoint's files against its manifest, before anyone
// restores from it: every file present, of the recorded size, with the
// recorded FNV-1a 64 checksum (the same digest the rank file's trailer holds).
#pragma once

#include <string>

#include "absl/status/status.h"
#include "zshard/v1/worker_service.pb.h"

namespace zshard::checkpoint {

// Checks every file of `manifest`, found relative to `dir` (the checkpoint's
// directory as it is now, which may differ from manifest.dir() when the
// checkpoint was moved). Reads each file once, streaming. NotFound naming
// the file when one is missing; DataLoss naming the file when its size or
// checksum differs from the manifest ("truncated or corrupt").
absl::Status VerifyFiles(const std::string& dir,
                         const v1::CheckpointManifest& manifest);

}  // namespace zshard::checkpoint
