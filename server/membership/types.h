// Plain value types of the coordinator's membership state machine: members,
// rank slots, epoch plans and the plan updates streamed to workers. No
// proto here; the service adapters convert.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace zshard::server {

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
  int64_t join_seq = 0;           // join order; ties in rank assignment
  int rank = -1;                  // rank in the committed epoch, -1 if none
  int64_t epoch = 0;              // epoch last reported by the worker
  int64_t step = 0;               // step last reported
  int64_t last_heartbeat_ms = 0;  // clock time of the last heartbeat
  int64_t suspect_since_ms = -1;  // pending suspect check, -1 if none
  std::string reason;             // why DEAD / LEFT / DRAINING
};

// One member's place in an epoch; rank/instance/shard_rank -1 for spares.
struct Slot {
  std::string worker_id;
  std::string name;
  std::string address;
  int rank = -1;
  int instance = -1;
  int shard_rank = -1;
  std::map<std::string, std::string> labels;
};

struct Move {
  int from_rank = -1;  // -1: checkpoint fragment
  int to_rank = 0;
  int buffer = 0;
  int bucket = 0;
  int64_t offset = 0;
  int64_t length = 0;
};

// An epoch's membership and plan identity.
struct EpochPlan {
  int64_t epoch = 0;
  int64_t base_epoch = 0;  // the committed epoch this one replaces
  int world = 0;
  int instances = 1;
  std::string plan_hash;
  int64_t resume_step = 0;
  // Ranks 0..world-1 in order, then the first spares in join order (at
  // most MembershipOptions::max_listed_spares).
  std::vector<Slot> slots;
  int spares = 0;  // healthy members beyond the world, listed or not
  std::vector<Move> moves;
  std::string reason;
};

// The rank of `worker_id` in `plan`, or -1 (a spare or not listed).
int RankIn(const EpochPlan& plan, const std::string& worker_id);

enum class PlanPhase { kProposed, kCommitted, kAbandoned };
const char* PlanPhaseName(PlanPhase phase);

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
  std::string kind;  // join, leave, dead, propose, commit, abandon, stable...
  std::string reason;
  int64_t seq = 0;  // position in the job's event log, from 1; 0: unset
};

}  // namespace zshard::server
