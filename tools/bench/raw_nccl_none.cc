// TimeRawNccl in a build without CUDA.
#include "tools/bench/raw_nccl.h"

namespace zshard::bench {

absl::StatusOr<std::vector<std::vector<double>>> TimeRawNccl(int, size_t,
                                                             comm::DataType,
                                                             int) {
  return absl::UnimplementedError(
      "raw nccl baseline: this build has no cuda support");
}

}  // namespace zshard::bench
