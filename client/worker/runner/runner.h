// Runner: what the worker's session drives. Transitions stop it
// at a step boundary, hand it each committed epoch (with its state moves)
// and tell it when the epoch is stable; the session reports its step in
// heartbeats and ends when it is done or has failed. Implemented by the
// idle counter and by the training runner.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "client/worker/checkpoint/checkpoint_file.h"
#include "common/plan/assignment.h"
#include "common/plan/moves.h"

namespace zshard::worker {

// A committed epoch as this worker sees it (PlanUpdate, COMMITTED phase).
struct EpochInfo {
  int64_t epoch = 0;
  int rank = -1;  // -1: spare or not a member
  int world = 0;
  int instances = 1;
  std::string plan_hash;  // the coordinator's plan hash for `world`
  int64_t resume_step = 0;
  // This worker's id (the moves name their ends by worker id).
  std::string worker_id;
  // This worker's instance and shard rank (-1 with rank -1).
  int instance = -1;
  int shard_rank = -1;
  // The stable epoch this one replaces (0: the job's first epoch).
  int64_t base_epoch = 0;
  // Adam updates applied by resume_step.
  int64_t resume_adam_step = 0;
  // The highest step applied before the job's last rollback (0: none):
  // steps up to it are repeats.
  int64_t repeat_through = 0;
  // The state to move before the epoch is ready: this worker's own moves
  // (the update carries no others), each with its index in the epoch's
  // full list. Only the destination's buffer, bucket and offset are known
  // (the source's are -1); a checkpoint source's fragment indexes
  // checkpoint_files.
  std::vector<plan::Move> moves;
  // The files that checkpoint sources read, relative to restore_dir.
  std::vector<std::string> checkpoint_files;
  // Set when every range comes from the checkpoint in restore_dir (a
  // rollback or a restore): no member uses state of its own.
  bool restore = false;
  std::string restore_dir;
  // Ranks whose commit all-reduce of step resume_step is pending finish
  // that step with these values before the moves.
  bool finish_pending_step = false;
  std::vector<double> commit_values;
  // Every member's place in the epoch (ranks first, then listed spares).
  std::vector<plan::Assignment> assignments;
};

// What a worker reports when it acks PREPARED.
struct PreparedState {
  // Last completed step and Adam updates applied by then.
  int64_t step = 0;
  int64_t adam_step = 0;
  // The commit all-reduce of step + 1 failed after this rank contributed:
  // it can finish that step with a passing rank's commit values.
  bool commit_pending = false;
  // The commit all-reduce's result of `step` (empty: unknown).
  std::vector<double> commit_values;
};

// A failure the runner survives but the coordinator must hear of: a rank
// file that could not be written, or a committed epoch that could not be
// prepared (the runner keeps its state and waits for the next proposal).
struct RunnerFailure {
  // kStep: training step `step` failed in a stable epoch (the runner keeps
  // its state and waits for the next epoch, which the coordinator proposes
  // once it knows every member is alive).
  // kEvent: something of the worker's own (its trainer process refused,
  // lost or attached again), `event_kind` with `error` as the reason.
  enum class Kind { kCheckpointWrite, kPreparation, kStep, kEvent };
  Kind kind = Kind::kPreparation;
  int64_t epoch = 0;
  // kCheckpointWrite: the step, its checkpoint dir and this worker's rank.
  int64_t step = 0;
  std::string dir;
  int rank = -1;
  // Why, in one line.
  std::string error;
  // kPreparation: what failed when known (a checkpoint dir), else empty.
  std::string source;
  bool source_is_checkpoint = false;
  // kEvent: trainer_attached, trainer_lost or trainer_refused.
  std::string event_kind;
  // kPreparation, kStep: the epoch rank of the peer the failed collective
  // could not reach (-1: none named), its communicator group, and whether
  // its connection closed (its process is likely gone) rather than the
  // link failing.
  int peer_rank = -1;
  std::string peer_group;
  bool peer_closed = false;
};

// Whether a committed epoch is ready at once (ack ACTIVE now) or later,
// when the runner calls the ready callback.
enum class EpochStart { kReady, kPending };

// Thread-safe: the session's threads call every method concurrently.
class Runner {
 public:
  // Called (from the runner's own thread, no lock held) when a committed
  // epoch that OnEpochCommitted answered kPending is ready: state moved and
  // communicators built.
  using EpochReadyCallback = std::function<void(int64_t epoch)>;
  // Called when a rank wrote its checkpoint file; returns the coordinator's
  // answer (failures are logged by the runner, never fatal).
  using CheckpointReporter = std::function<absl::Status(
      int64_t epoch, int64_t step, int64_t adam_step, const std::string& dir,
      const checkpoint::RankFileInfo& file)>;

  // Called (from the runner's thread, no lock held) for each failure the
  // coordinator must hear of; must not block long.
  using FailureReporter = std::function<void(const RunnerFailure& failure)>;

  // Called (from the runner's thread, no lock held) when this worker cannot
  // go on and should leave gracefully, as on SIGTERM (its state handed
  // over), with the reason; must not block.
  using LeaveRequester = std::function<void(const std::string& why)>;

  // What a runner calls back, given to it at construction (runners that
  // never prepare, checkpoint, fail or leave take none). An empty one is
  // not called.
  struct Callbacks {
    EpochReadyCallback ready;
    CheckpointReporter report_checkpoint;
    FailureReporter report_failure;
    LeaveRequester leave;
  };

  virtual ~Runner() = default;

  // Epoch `epoch` was proposed with base (stable) epoch `base_epoch`;
  // called after Pause.
  virtual void OnProposed(int64_t epoch, int64_t base_epoch) = 0;

  // Told once when a new committed epoch is applied (not on replays of the
  // same epoch). kReady: the caller then calls Activate(resume_step) (a
  // rank) or Pause (no rank) and acks ACTIVE at once; kPending: the
  // runner prepares the epoch on its own thread and calls the ready
  // callback when done (never, if the preparation fails).
  virtual EpochStart OnEpochCommitted(const EpochInfo& epoch) = 0;

  // Every rank of committed epoch `epoch` is ready: the old state may go
  // and ranks step (the caller re-activates a rank that is not stepping).
  virtual void OnEpochStable(int64_t epoch) = 0;

  // Starts stepping from `step` (the last completed step).
  virtual void Activate(int64_t step) = 0;
  // Stops at the next step boundary (for a stepping rank of a training
  // job: the next boundary every rank agrees on); returns the last
  // completed step.
  virtual int64_t Pause() = 0;
  // What to report in a PREPARED ack, after Pause.
  virtual PreparedState prepared_state() const = 0;
  // The coordinator asked to abort the epoch's collectives.
  virtual void Abort() = 0;

  // Last completed step.
  virtual int64_t step() const = 0;
  // True while stepping is allowed.
  virtual bool active() const = 0;
  // True once the job's steps are done.
  virtual bool done() const = 0;
  // OK, or the error that stopped the runner for good (the worker then
  // leaves and exits 1).
  virtual absl::Status failure() const = 0;
  // The coordinator ended the job: every rank finished its steps, or
  // (`failed`) it cannot go on, for `reason`. Spares hear it too.
  virtual void OnJobEnd(bool failed, const std::string& reason) = 0;
  // Each heartbeat: why this worker is not stepping, in the coordinator's
  // words (no world can form, a spare), or empty.
  virtual void OnWaiting(const std::string& why) = 0;
};

}  // namespace zshard::worker
