// One rank's checkpoint file (docs/design.md section 7): the fp32 master, Adam
// m and v of its owned windows, in param space (per param, element
// ranges), with the step and Adam step, written bucket by bucket (no copy
// of the state in memory) to a temporary name and renamed when complete.
// The file's FNV-1a 64 checksum covers every byte before the trailer; a
// reader verifies it before trusting any range.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/worker/engine/engine_buffers.h"
#include "common/plan/moves.h"

namespace zshard::checkpoint {

// What the coordinator's manifest records of one rank's file (the session
// converts it into the wire form).
struct RankFileInfo {
  // Relative to the checkpoint's directory.
  std::string path;
  // The writer's rank.
  int rank = 0;
  int64_t bytes = 0;
  // Hex digest of the whole file's content (FNV-1a 64).
  std::string checksum;
  // The param ranges held, in file order.
  std::vector<plan::CheckpointFragment> ranges;
};

// The file name of `rank`'s file inside a checkpoint directory:
// "rank-00003.zsc".
std::string RankFileName(int rank);

// The directory of step `step` inside `root`: ROOT/step-00000010.
std::string StepDir(const std::string& root, int64_t step);

// Writes `state`'s owned state to dir/RankFileName(rank) (creating dir),
// returning what the coordinator's manifest records: the path relative to
// `dir`, the rank, bytes, checksum and the param ranges held. Padding is
// not written. Internal/PermissionDenied on I/O errors, naming the path.
absl::StatusOr<RankFileInfo> WriteRankFile(const engine::EngineBuffers& state,
                                           const std::string& dir, int rank,
                                           int64_t step, int64_t adam_step);

// A verified, open checkpoint file. Copies share the open file; Read is
// const and thread-safe.
class RankFileReader {
 public:
  // Opens `path` and verifies its checksum and header. DataLoss for a
  // truncated or corrupt file, NotFound when missing.
  static absl::StatusOr<RankFileReader> Open(const std::string& path);

  int64_t step() const { return step_; }
  int64_t adam_step() const { return adam_step_; }
  // The writer's rank.
  int rank() const { return rank_; }
  // The ranges held, in file order.
  std::vector<plan::CheckpointFragment> ranges() const;

  // Copies the state of param `param_index` (expert rank `expert_rank`)
  // elements [begin, end) into the three arrays (end - begin floats each).
  // NotFound when the file does not hold the whole range.
  absl::Status Read(int param_index, int expert_rank, int64_t begin,
                    int64_t end, float* master, float* exp_avg,
                    float* exp_avg_sq) const;

 private:
  // Closes the descriptor when the last copy goes.
  struct File {
    int fd = -1;
    ~File();
  };

  RankFileReader() = default;
  std::string path_;
  std::shared_ptr<const File> file_;
  int64_t step_ = 0;
  int64_t adam_step_ = 0;
  int rank_ = 0;
  // Ranges held and where each starts in the file.
  struct Entry {
    int param_index = 0;
    int expert_rank = 0;
    int64_t begin = 0;
    int64_t end = 0;
    int64_t offset = 0;  // byte offset of the range's master floats
  };
  std::vector<Entry> entries_;
};

}  // namespace zshard::checkpoint
