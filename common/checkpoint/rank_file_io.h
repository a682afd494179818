// Whole rank files (rank_file_format.h) for the offline conversions: read
// one verified into memory, or write one from memory. The worker streams
// its own (client/worker/checkpoint/); these are for tools that hold a
// model's state at once.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace zshard::checkpoint {

// One range of a param's elements with its state.
struct RankFileRange {
  int param_index = 0;
  int expert_rank = 0;
  int64_t begin = 0;
  int64_t end = 0;            // > begin
  std::vector<float> master;  // end - begin values each
  std::vector<float> exp_avg;
  std::vector<float> exp_avg_sq;
};

struct RankFileContents {
  int64_t step = 0;
  int64_t adam_step = 0;
  int rank = 0;
  std::vector<RankFileRange> ranges;  // file order
};

// What a checkpoint's manifest records of a written file.
struct WrittenRankFile {
  std::string name;  // "rank-00000.zsc", relative to the directory
  int64_t bytes = 0;
  std::string checksum;  // hex FNV-1a 64 of every byte before the trailer
};

// "rank-00003.zsc", the name the worker gives rank 3's file.
std::string RankFileNameOf(int rank);

// Reads the rank file at `path`, its checksum verified (streaming) before
// anything in it is trusted. NotFound when missing; DataLoss naming the
// file when it is truncated or corrupt.
absl::StatusOr<RankFileContents> ReadRankFileContents(const std::string& path);

// Writes `contents` as DIR/RankFileNameOf(contents.rank), atomically, in
// the worker's layout, ranges in the given order. InvalidArgument for a
// range whose arrays do not hold end - begin values; the I/O error naming
// the path otherwise.
absl::StatusOr<WrittenRankFile> WriteRankFileContents(
    const RankFileContents& contents, const std::string& dir);

}  // namespace zshard::checkpoint
