// Verifying a rank checkpoint file before any of it is trusted: its
// checksum, header and range table (the layout of rank_file_format.h).
// Shared by the worker's streaming reader and the offline converters.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/checkpoint/rank_file_format.h"

namespace zshard::checkpoint {

// Reads exactly `size` bytes at `offset` into `out`; false on a short read
// or an error.
using ReadAtFn = std::function<bool(char* out, size_t size, int64_t offset)>;

struct VerifiedRankFile {
  format::Header header;
  std::vector<format::RangeRecord> ranges;  // in file order
};

// The header and range table of the rank file `path` of `size` bytes, read
// through `read_at`, once the FNV-1a 64 checksum of every byte before the
// trailer equals the trailer, the magic and version are right and every
// range lies inside the data. DataLoss "checkpoint file PATH: why"
// otherwise (truncated, checksum mismatch, bad magic, unknown version, a
// malformed range).
absl::StatusOr<VerifiedRankFile> VerifyRankFile(const ReadAtFn& read_at,
                                                int64_t size,
                                                const std::string& path);

}  // namespace zshard::checkpoint
