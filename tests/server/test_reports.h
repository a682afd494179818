// Checkpoint reports for the membership's tests: rank files of the test
// job's model ("a": 1000 elements, "b": 2100) split in halves. No proto.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "server/membership/checkpoints/checkpoint_registry.h"

namespace zshard::server::testing {

// Files that split every param of the test model ("a": 1000 elements,
// "b": 2100) in halves between ranks 0 and 1.
inline CheckpointFileInfo HalfFile(int rank) {
  CheckpointFileInfo f;
  f.path = "rank-0000" + std::to_string(rank) + ".zsc";
  f.rank = rank;
  f.bytes = 1000;
  f.checksum = "00ff";
  f.ranges = {{0, 0, rank * 500, (rank + 1) * 500},
              {1, 0, rank * 1050, (rank + 1) * 1050}};
  return f;
}

inline CheckpointReport Report(int64_t epoch, int64_t step,
                               CheckpointFileInfo f) {
  CheckpointReport r;
  r.epoch = epoch;
  r.step = step;
  r.adam_step = step - 1;
  r.dir = "/ckpt/step-" + std::to_string(step);
  r.file = std::move(f);
  return r;
}

}  // namespace zshard::server::testing
