// The state-movement planner (docs/design.md section 6): from the last
// committed ownership, the members still alive, optional checkpoint
// fragments and the next epoch's ownership, the list of moves of optimizer
// state (master, m and v together, 12 bytes per element) that gives every
// new owner exactly its ranges. Pure: the same input gives the same output,
// in the same order.
// Model params (bf16) are never moved: after the moves every owner casts its
// master slice into its param slice and the instance's all-gather fills
// every param buffer, as in every step.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/plan/ownership.h"

namespace zshard::plan {

// A param-space range of state that a checkpoint holds (docs/design.md section
// 7): a source of last resort.
struct CheckpointFragment {
  int param_index = 0;
  int expert_rank = 0;  // as in OwnedRange
  int64_t begin = 0;    // element range [begin, end) of the flattened param
  int64_t end = 0;
};

enum class MoveSource { kMember, kCheckpoint };

// One transfer of the state of param elements [begin, end) to a new owner.
struct Move {
  // Position in the epoch's full list (MovePlan.moves): PlanMoves numbers
  // its moves 0, 1, ... in order. A member is sent only its own moves, each
  // with this index, and walks them in index order (see
  // client/worker/reshard/state_mover.h); -1: unset.
  int index = -1;
  MoveSource source = MoveSource::kMember;
  // kMember: the sender, its rank in the old ownership and where `begin`
  // lives in its (old) buffers. Unset (empty, -1) for kCheckpoint.
  std::string source_member;
  int source_rank = -1;
  int source_buffer = -1;
  int source_bucket = -1;
  int64_t source_offset_in_bucket = -1;
  // kCheckpoint: index into the fragments given to PlanMoves; -1 otherwise.
  int fragment = -1;
  // kCheckpoint: the fragment's file, relative to the checkpoint's dir.
  // PlanMoves leaves it empty (fragments name no file); its caller fills it.
  std::string checkpoint_file;
  // The receiver, its rank in the new ownership and where `begin` lives in
  // its new buffers.
  std::string dest_member;
  int dest_rank = 0;
  int dest_buffer = 0;
  int dest_bucket = 0;
  int64_t dest_offset_in_bucket = 0;
  // The state's address.
  int param_index = 0;
  int expert_rank = 0;
  int64_t begin = 0;
  int64_t end = 0;

  int64_t elements() const { return end - begin; }
  int64_t bytes() const { return elements() * kStateBytesPerElement; }
};

// A range that some new owner needs and that neither a live member nor a
// checkpoint fragment holds.
struct LostRange {
  int param_index = 0;
  int expert_rank = 0;
  int64_t begin = 0;
  int64_t end = 0;
};

struct MovePlan {
  // Sorted by (param_index, expert_rank, begin, dest_rank); adjacent ranges
  // with the same source and destination are merged. moves[i].index == i.
  std::vector<Move> moves;
  // Sum of bytes() over moves (checkpoint reads included).
  int64_t bytes_moved = 0;
  // The part of bytes_moved read from checkpoint fragments.
  int64_t bytes_from_checkpoint = 0;
  // The part of bytes_moved sent between members with the same (non-empty)
  // node label.
  int64_t bytes_same_node = 0;
  // Bytes whose new owner does not already hold them (each destination
  // element counted once, lost ones included). Equals bytes_moved when
  // nothing is lost: the planner never moves more than is needed.
  int64_t lower_bound_bytes = 0;
  // Lost ranges in (param, expert_rank, begin) order, each listed once.
  std::vector<LostRange> lost;
};

struct MoveOptions {
  // When true (the default), PlanMoves fails with FailedPrecondition naming
  // the first lost range; when false it returns the plan with `lost` set.
  bool fail_on_loss = true;
};

// Plans the moves from `previous` (the last committed ownership; may be an
// empty Ownership when there is none, e.g. a restore) to `next`.
// `alive` lists the members of `previous` whose state is intact; others are
// ignored as holders and sources. A destination that holds an element
// already (alive, same member id) needs nothing; otherwise the source is a
// live holder on the destination's node if any, else the live holder that
// has sent the fewest elements so far (ties: smallest member id), else the
// checkpoint fragment with the smallest index. InvalidArgument when the
// ownerships do not describe the same model or expert_parallel, or a
// fragment is malformed; FailedPrecondition when a range is lost (see
// MoveOptions::fail_on_loss).
absl::StatusOr<MovePlan> PlanMoves(
    const Ownership& previous, const std::vector<std::string>& alive,
    const std::vector<CheckpointFragment>& fragments, const Ownership& next,
    const MoveOptions& options = MoveOptions());

}  // namespace zshard::plan
