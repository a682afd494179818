// Plain value types of the coordinator's membership state machine: members,
// rank slots, epoch plans and the plan updates streamed to workers. No
// proto here; the service adapters convert.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/plan/assignment.h"
#include "common/plan/moves.h"

namespace zshard::server {

struct MemberLease;  // lease_book.h

enum class MemberState { kJoining, kActive, kSpare, kDraining, kDead, kLeft };
// "JOINING", "ACTIVE", "SPARE", "DRAINING", "DEAD", "LEFT".
const char* MemberStateName(MemberState state);
// The member still counts: it heartbeats and may hold a rank.
inline bool IsLive(MemberState s) {
  return s != MemberState::kDead && s != MemberState::kLeft;
}

struct DeviceInfo {
  std::string kind;  // "cpu" or "cuda"
  std::string model;
  int64_t memory_bytes = 0;
  int32_t count = 0;
};

// One incarnation of a worker.
struct Member {
  std::string worker_id;  // unique per incarnation
  std::string name;
  std::string token;  // 128-bit hex session token
  std::string address;
  std::map<std::string, std::string> labels;
  DeviceInfo device;
  MemberState state = MemberState::kJoining;
  int64_t join_seq = 0;  // join order; ties in rank assignment
  int rank = -1;         // rank in the committed epoch, -1 if none
  // Epoch and step last reported, as of the last MemberTable::Copy (the
  // live values are in `lease`).
  int64_t epoch = 0;
  int64_t step = 0;
  std::string reason;  // why DEAD / LEFT / DRAINING
  // Heartbeat times, suspect checks and the live epoch and step, shared
  // with the heartbeat path (see lease_book.h); set by MemberTable.
  std::shared_ptr<MemberLease> lease;
};

// One member's place in an epoch; rank/instance/shard_rank -1 for spares.
// The planner's type, the same one the worker converts updates into.
using Slot = plan::Assignment;

// A move set's totals (see zshard.v1.MoveSummary).
struct MoveSummary {
  int moves = 0;
  int64_t bytes_moved = 0;
  int64_t lower_bound_bytes = 0;
  int64_t bytes_from_checkpoint = 0;
  int64_t bytes_same_node = 0;
};

// The checkpoint an epoch's state comes from (rollback or restore).
struct RestoreRef {
  int64_t step = -1;  // -1: no restore
  std::string dir;
  int64_t adam_step = 0;
  bool active() const { return step >= 0; }
};

// An epoch's membership and plan identity.
struct EpochPlan {
  int64_t epoch = 0;
  int64_t base_epoch = 0;  // the committed epoch this one replaces
  int world = 0;
  int instances = 1;
  std::string plan_hash;
  int64_t resume_step = 0;
  int64_t resume_adam_step = 0;
  // Ranks that acked PREPARED commit_pending one step behind finish step
  // resume_step with these commit values before the moves.
  bool finish_pending_step = false;
  std::vector<double> commit_values;
  // The highest step applied before the job's last rollback to a
  // checkpoint (0: none); steps after resume_step up to it run again.
  int64_t repeat_through = 0;
  // Ranks 0..world-1 in order, then the first spares in join order (at
  // most MembershipOptions::max_listed_spares).
  std::vector<Slot> slots;
  int spares = 0;  // healthy members beyond the world, listed or not
  std::vector<plan::Move> moves;  // in param space (see zshard.v1.Move)
  MoveSummary summary;
  RestoreRef restore;  // set: every range comes from this checkpoint
  std::string reason;
  // For the reshard history: the base epoch's world, when it was proposed
  // and committed (wall clock ms, 0: not yet) and how long commit to the
  // last ACTIVE ack took (0 until stable).
  int world_before = 0;
  int64_t proposed_ms = 0;
  int64_t committed_ms = 0;
  int64_t duration_ms = 0;
};

// The rank of `worker_id` in `plan`, or -1 (a spare or not listed).
int RankIn(const EpochPlan& plan, const std::string& worker_id);

enum class PlanPhase { kProposed, kCommitted, kAbandoned, kStable };

// One message of the WatchPlan stream.
struct PlanUpdate {
  int64_t seq = 0;  // position in the update log, grows by one
  PlanPhase phase = PlanPhase::kProposed;
  EpochPlan plan;
};

// What a heartbeat response asks the worker to do.
enum class Command { kNone, kAbort, kDrain, kExit };

struct HeartbeatReply {
  int64_t epoch = 0;          // committed epoch
  int64_t pending_epoch = 0;  // epoch in transition, 0 if none
  MemberState state = MemberState::kJoining;
  Command command = Command::kNone;
  // With kExit: the job failed (e.g. state lost with no checkpoint).
  bool job_failed = false;
  std::string exit_reason;
  // Why the member is not stepping (no world can form, or a spare); empty
  // while it holds a rank.
  std::string waiting;
};

struct JoinReply {
  std::string worker_id;
  std::string token;
  int64_t epoch = 0;
};

// A line of the event log ("why is the world 6?").
struct Event {
  int64_t time_ms = 0;  // wall clock
  int64_t epoch = 0;
  // join, leave, dead, drain, propose, moves, commit, abandon, stable,
  // rollback, restore, checkpoint, lost, failed, finished, restart...
  std::string kind;
  std::string reason;
  int64_t seq = 0;  // position in the job's event log, from 1; 0: unset
};

}  // namespace zshard::server
