// Plain value types of committed checkpoints as the coordinator keeps them
// (docs/design.md section 7): rank files with their param-space ranges, and the
// manifest. No proto here; common/checkpoint and the service adapters
// convert to and from zshard.v1.CheckpointManifest.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace zshard::server {

// Elements [begin, end) of one param's state (expert_rank 0 when dense);
// in a model-parallel job's checkpoint, param_index is its slot's.
struct ParamRangeInfo {
  int param_index = 0;
  int expert_rank = 0;
  int64_t begin = 0;
  int64_t end = 0;
};

// One rank's file of a checkpoint.
struct CheckpointFileInfo {
  std::string path;  // relative to the checkpoint's dir
  // The writer's rank in `epoch`; in a model-parallel job's manifest, its
  // data-parallel rank in `slot` (a report carries the global rank).
  int rank = 0;
  int64_t bytes = 0;
  std::string checksum;
  std::vector<ParamRangeInfo> ranges;
  int slot = 0;  // plan::SlotIndex of a model-parallel job's file, else 0
};

// A checkpoint's manifest (see zshard.v1.CheckpointManifest).
struct CheckpointRecord {
  std::string job;
  int64_t step = 0;
  int64_t adam_step = 0;
  int64_t epoch = 0;
  int world = 0;
  int instances = 1;
  std::string dir;
  std::vector<CheckpointFileInfo> files;  // by slot, then rank
  // The params, every slot's in slot order (slot_params of each).
  std::vector<std::string> param_names;
  std::vector<int64_t> param_numels;
  // The model-parallel sizes it was written with, and each slot's param
  // count (empty without model parallelism).
  int tensor = 1;
  int pipeline = 1;
  int context = 1;
  std::vector<int> slot_params;
  int64_t committed_ms = 0;  // wall clock
  int64_t bytes = 0;         // sum of the files' bytes
};

// One transition as the reshard history shows it.
struct ReshardRecord {
  int64_t epoch = 0;
  int64_t base_epoch = 0;
  std::string reason;
  int world_before = 0;
  int world_after = 0;
  int instances = 1;
  int moves = 0;
  int64_t bytes_moved = 0;
  int64_t lower_bound_bytes = 0;
  int64_t bytes_from_checkpoint = 0;
  int64_t bytes_same_node = 0;
  int64_t restored_step = -1;  // -1: state not from a checkpoint
  int64_t proposed_ms = 0;     // wall clock
  int64_t duration_ms = 0;     // commit to the last ACTIVE ack
  // "stable", "abandoned", "broken" or "in progress".
  std::string outcome;
};

}  // namespace zshard::server
