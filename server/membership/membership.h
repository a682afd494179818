// The coordinator's membership state machine (docs/design.md section 6), as
// one thread-safe facade that the service adapters call. It composes the
// parts, each with its own contract and folder: members/ (MemberTable:
// members, leases, tokens), transition/ (EpochTransition: proposal,
// PREPARED/COMMITTED/STABLE phases, commit point; SettleWindow;
// WorldChoice; TransitionHealth; ReshardHistory), checkpoints/
// (JobCheckpoints: manifests, registry, rollback source), publish/
// (Publisher: the store batch, the group-commit writer and the gates that
// show facts, events and plan updates once durable) and JobState; this
// file's class decides when one part acts on another (a dead member
// abandons a proposal, a commit ranks the members...). No gRPC inside; time
// comes from an injected Clock, durability from an optional StateStore.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/job/job_spec.h"
#include "common/plan/plan.h"
#include "server/events/event_log.h"
#include "server/membership/checkpoints/job_checkpoints.h"
#include "server/membership/job_state.h"
#include "server/membership/members/lease_book.h"
#include "server/membership/members/member_table.h"
#include "server/membership/publish/plan_update_log.h"
#include "server/membership/publish/publisher.h"
#include "server/membership/transition/commit_point.h"
#include "server/membership/transition/epoch_transition.h"
#include "server/membership/transition/reshard_history.h"
#include "server/membership/transition/settle_window.h"
#include "server/membership/transition/transition_health.h"
#include "server/membership/transition/world_choice.h"
#include "server/state/checkpoint_types.h"
#include "server/state/state_store.h"
#include "server/state/types.h"

namespace zshard::server {

struct MembershipOptions {
  // A suspect silent for longer than this is DEAD at once. 0: twice the
  // heartbeat interval, at most half the lease.
  int64_t suspect_window_ms = 0;
  // A suspect that does not heartbeat within this time after the report is
  // DEAD. 0: 3 heartbeat intervals, at most the lease.
  int64_t suspect_grace_ms = 0;
  // Joins beyond this many live members get ResourceExhausted.
  int max_live_members = 32768;
  // DEAD/LEFT records kept (oldest forgotten first).
  int max_gone_members = 1024;
  // Spares listed in a plan update (after the ranks); the rest are only
  // counted. Keeps updates small when hundreds of spares watch.
  int max_listed_spares = 8;
  // Plan updates kept for watchers that fall behind (they get a snapshot).
  int update_log_size = 64;
  // Events kept in memory for the dashboard (restored from the store at
  // start). Default 4096.
  int event_log_size = 4096;
  // Transitions kept in the reshard history. Default 256.
  int history_size = 256;
  // Writes a completed checkpoint's manifest.json into its dir (called
  // under the membership's lock before the manifest is committed; an error
  // leaves it uncommitted). Empty: no file is written.
  std::function<absl::Status(const CheckpointRecord&)> write_manifest;
  // A tick that finds the previous one longer ago than this (the process
  // was stopped, or starved) first gives every live member one lease of
  // grace from now: silence the coordinator could not hear is no death.
  // 0: never (the coordinator sets it from its tick interval).
  int64_t pause_grace_gap_ms = 0;
  // Called under the membership's lock just before a proposal is planned
  // (tests make planning slow with it). Empty: none.
  std::function<void()> planning_hook;
  // A validated checkpoint to start the job from (zshard-coordinator
  // --restore): only for a store holding no job; it becomes the newest
  // checkpoint and the first epoch restores every range from it.
  std::optional<CheckpointRecord> restore;
};

// A member as the dashboard shows it.
struct MemberView {
  Member member;
  int instance = -1;
  int shard_rank = -1;
  int64_t ms_since_heartbeat = 0;
  // A peer reported it; the suspect grace has not run out.
  bool suspect = false;
  // Kept out of any world with a peer after their link failed twice:
  // "apart from NAME for N s: reason" (empty: not quarantined).
  std::string quarantine;
};

struct ClusterView {
  std::string job;
  int64_t epoch = 0;
  bool transitioning = false;
  int64_t pending_epoch = 0;
  int world = 0;
  int instances = 1;
  std::string plan_hash;
  int min_world = 0;
  int max_world = 0;
  int target_world = 0;
  // The coordinator is cut off from most members (IsolationGuard): for how
  // long (0: not isolated).
  bool isolated = false;
  int64_t isolated_ms = 0;
  std::vector<MemberView> members;  // live first, by rank, then join order
};

// Counters for metrics.
struct MembershipStats {
  std::map<MemberState, int> members_by_state;
  // The coordinator is cut off from most members (IsolationGuard).
  bool isolated = false;
  int64_t epoch = 0;
  int64_t commits = 0;
  int64_t abandons = 0;
  int64_t proposals = 0;
  // Proposals abandoned because a later change altered their world.
  int64_t superseded = 0;
  // Stable transitions that moved state, the sum of their bytes_moved, and
  // the last one's duration (commit to the last ACTIVE ack).
  int64_t reshards = 0;
  int64_t reshard_bytes = 0;
  double last_reshard_seconds = 0;
  // Committed checkpoint manifests, the newest one's step (-1: none) and
  // its commit time (wall clock ms; 0: none).
  int64_t checkpoints = 0;
  int64_t last_checkpoint_step = -1;
  int64_t last_checkpoint_ms = 0;
  // Failed rank writes reported (each leaves its checkpoint incomplete).
  int64_t checkpoint_failures = 0;
  // Seconds from a peer's first report of a member to the proposal that
  // followed its confirmed death.
  DetectionHistogram failure_detection;
  // Links between members reported failed (each pair once an epoch), and
  // members excluded for a link that failed twice.
  int64_t link_failures = 0;
  int64_t exclusions = 0;
  // Transition phases given up for a timeout, and epochs whose preparation
  // a member reported failed.
  int64_t transition_timeouts = 0;
  int64_t prepare_failures = 0;
  // The state store's group commit (StoreWriter::Stats): changes written,
  // the transactions that wrote them, failed transactions, their seconds.
  int64_t store_changes = 0;
  int64_t store_transactions = 0;
  int64_t store_failures = 0;
  double store_seconds = 0;
};

// A member's report that it could not prepare the committed epoch.
struct PrepareFailure {
  std::string error;
  // > 0: training step `step` failed in the committed, stable epoch (not a
  // preparation): see Membership::AckFailed.
  // What failed: a checkpoint dir, a source member's id, or empty.
  std::string source;
  bool source_is_checkpoint = false;
  int64_t step = 0;
  // The peer this member could not reach, by rank in the epoch (-1: none
  // named), its communicator group, and whether its connection closed or
  // reset (rather than could not be made): see LinkBook.
  int peer_rank = -1;
  std::string peer_group;
  bool peer_closed = false;
};

// Thread-safe. Every public method takes the one internal lock (the parts
// it owns are thread-compatible and guarded by it), except WaitForUpdates,
// which takes only the update log's lock and is the only one that blocks,
// and Heartbeat and CheckSession, which take only the lease book's lock and
// read the facts published at the end of every change: they never wait for
// planning, moves, hashing or store writes.
class Membership {
 public:
  // Creates the state machine for `spec`, restoring members and epochs
  // from `store` when it holds them (leases re-armed: each live member gets
  // one lease from now). FailedPrecondition when the store holds another
  // job. `clock` and `store` (may be null: memory only) must outlive it.
  static absl::StatusOr<std::unique_ptr<Membership>> Create(
      job::JobSpec spec, Clock* clock, StateStore* store,
      MembershipOptions options = {});

  // A new incarnation of worker `args.name`; an older live incarnation of
  // the name is fenced (DEAD). InvalidArgument on bad names or labels,
  // ResourceExhausted past max_live_members.
  absl::StatusOr<JoinReply> Join(const JoinArgs& args);

  // Renews the lease, without the membership's lock. NotFound for unknown
  // ids, Unauthenticated for a wrong or fenced token or a DEAD/LEFT member,
  // FailedPrecondition for an epoch newer than any proposed.
  absl::StatusOr<HeartbeatReply> Heartbeat(const std::string& worker_id,
                                           const std::string& token,
                                           int64_t epoch, int64_t step);

  // PREPARED ack for the proposed `epoch`; returns the phase after it. The
  // epoch commits once every member of the proposal and every live member
  // ranked in the base (last stable) epoch acked; the resume point comes
  // from the acks of the members holding state (ResolveCommitPoint). When
  // they cannot be reconciled the proposal is abandoned and the job rolls
  // back to the newest checkpoint, or fails without one.
  absl::StatusOr<PlanPhase> AckPrepared(const std::string& worker_id,
                                        const std::string& token, int64_t epoch,
                                        const PreparedAck& ack);
  // The same with only a step (Adam step = step, nothing pending).
  absl::StatusOr<PlanPhase> AckPrepared(const std::string& worker_id,
                                        const std::string& token, int64_t epoch,
                                        int64_t step, bool commit_point_passed);
  // ACTIVE ack for the committed `epoch`. Once every rank acked, the epoch
  // is STABLE: it becomes the base of the next proposal and
  // PLAN_PHASE_STABLE is published for it.
  absl::StatusOr<PlanPhase> AckActive(const std::string& worker_id,
                                      const std::string& token, int64_t epoch);

  // FAILED ack for the committed `epoch`: the member could not prepare it
  // (a move's source, a damaged or missing checkpoint file, ...) and keeps
  // its state. Records event "prepare_failed" naming the member, the source
  // and the reason; a failed checkpoint source is taken out of use (event
  // "checkpoint_skipped") and the next proposal restores from the newest
  // older intact one, or the job fails as "lost" without one. The epoch is
  // broken either way and the coordinator proposes again. FailedPrecondition
  // for an epoch that is not the committed, unstable one.
  // Records what a worker reports of its own (worker_reports.cc): event
  // `kind` (trainer_attached, trainer_lost or trainer_refused; others are
  // InvalidArgument) with "member NAME: reason".
  absl::Status WorkerEvent(const std::string& worker_id,
                           const std::string& token, const std::string& kind,
                           const std::string& reason);
  // Records an event of the coordinator process itself (leader, standby,
  // deposed: its election) and stores it with the next write.
  void CoordinatorEvent(const std::string& kind, const std::string& reason);
  absl::StatusOr<PlanPhase> AckFailed(const std::string& worker_id,
                                      const std::string& token, int64_t epoch,
                                      const PrepareFailure& failure);

  // A peer suspects the member given by id (or, if empty, by rank in
  // `epoch`). The rule: the suspect is DEAD at once when it has been silent
  // longer than the suspect window; otherwise it is DEAD unless it
  // heartbeats within the suspect grace after the report (checked by
  // Tick). Returns the suspect's state after the immediate check.
  absl::StatusOr<MemberState> ReportSuspect(const std::string& worker_id,
                                            const std::string& token,
                                            int64_t epoch,
                                            const std::string& suspect_id,
                                            int suspect_rank,
                                            const std::string& reason);

  // The member's plan watch (its WatchPlan stream) opened or closed; takes
  // no lock of the membership's. A suspect whose every watch closed is
  // confirmed dead at once (by ReportSuspect, or by the next Tick): a
  // killed process's connections close at once, while a paused one's stay
  // open and its lease judges it. Unknown ids are ignored.
  void WatchOpened(const std::string& worker_id);
  void WatchClosed(const std::string& worker_id);

  // Graceful leave. A member holding a rank in the stable epoch of a job
  // that is neither finished nor failed hands over: it becomes DRAINING,
  // the world is re-planned without it (it stays a source of moves) and the
  // result is true; it is told COMMAND_DRAIN once it holds no rank in the
  // stable epoch or a proposal, and then calls Leave again. Otherwise the
  // member is LEFT at once and the result is false.
  absl::StatusOr<bool> Leave(const std::string& worker_id,
                             const std::string& token,
                             const std::string& reason);

  // Admin: marks the live member `name` DRAINING (the hand-over of Leave).
  // NotFound if none.
  absl::Status Drain(const std::string& name);

  // A rank of instance 0 reports its checkpoint file. Returns true when
  // this report completed the checkpoint: manifest.json was written (see
  // MembershipOptions::write_manifest), the manifest stored and event
  // "checkpoint" recorded. Codes as in Heartbeat for the session;
  // FailedPrecondition for an epoch other than the committed or stable
  // one, or a reporter not holding `report.file.rank` in it; see
  // CheckpointRegistry::Add for the rest.
  absl::StatusOr<bool> ReportCheckpoint(const std::string& worker_id,
                                        const std::string& token,
                                        const CheckpointReport& report);

  // Admin: caps the world (0 clears). InvalidArgument unless 0 or a
  // multiple of the instances within [min, max]. Returns the cap.
  absl::StatusOr<int> SetTargetWorld(int world);

  // Expires leases and confirms suspects at the clock's time (after a gap
  // longer than pause_grace_gap_ms since the last tick, every live member
  // first gets one lease of grace); re-plans.
  void Tick();

  // OK when the token is the live incarnation of `worker_id` (codes as in
  // Heartbeat); without the membership's lock.
  absl::Status CheckSession(const std::string& worker_id,
                            const std::string& token);
  // OK when `epoch` is the committed epoch or the one in transition;
  // FailedPrecondition otherwise.
  absl::Status CheckEpoch(int64_t epoch);

  // Plan updates after `after_seq` (0: a snapshot: the committed epoch,
  // then the one in transition). Blocks up to `timeout` when there are
  // none; returns early with shutdown set after Shutdown().
  WatchBatch WaitForUpdates(int64_t after_seq, absl::Duration timeout);
  // Wakes every waiter; later waits return at once.
  void Shutdown();

  ClusterView View();
  EpochPlan CommittedPlan();
  // The last stable epoch (epoch 0: none yet).
  EpochPlan StablePlan();
  // Committed checkpoints, oldest first.
  std::vector<CheckpointRecord> Checkpoints();
  // Checkpoint attempts without a usable manifest, oldest first.
  std::vector<CheckpointAttempt> IncompleteCheckpoints();
  // The latest `limit` transitions (0: all kept), oldest first.
  std::vector<ReshardRecord> ReshardHistory(int limit);
  // Empty while the job can go on; why it failed otherwise.
  std::string FailureReason();
  MembershipStats Stats();
  // While the coordinator is isolated (IsolationGuard): how long it has
  // heard from no live member at all; 0 otherwise, or with none live.
  int64_t HeardFromNoneMs();
  int64_t CommittedEpoch();
  const job::JobSpec& spec() const { return spec_; }
  // False for the idle workload: its members hold no optimizer state, so
  // nothing moves, nothing is handed over and steps need not agree.
  bool HoldsState() const {
    return spec_.workload.kind != job::WorkloadKind::kIdle;
  }
  // Every event the membership records, numbered; lives as long as this.
  EventLog* events() { return publisher_.events(); }

 private:
  Membership(job::JobSpec spec, Clock* clock, StateStore* store,
             MembershipOptions options);

  absl::Status RestoreLocked(const StoredState& state)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Member `m` stops counting (DEAD or LEFT); abandons a proposal that
  // needs it as a rank or a source.
  void GoneLocked(Member& m, MemberState state, const std::string& reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `m` becomes DRAINING with `reason` after `change` (the event's and the
  // next proposal's reason); abandons a proposal that ranks it.
  void DrainLocked(Member& m, const std::string& reason,
                   const std::string& change, const std::string& event)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool HealthyLocked(const Member& m) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The members whose lease or suspect grace ran out at `now`, unless the
  // coordinator is cut off from most of them (IsolationGuard: then none,
  // with an event when the isolation begins or ends).
  std::vector<Expiry> ExpiredLocked(int64_t now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A peer's report of `m` is confirmed at `now`: the detection time runs
  // from its first report to the next proposal.
  void NoteReportedLocked(const Member& m, int64_t now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ForgetGoneLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CheckFinishedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Proposes a new epoch when membership calls for one, once the changes
  // settled (see JobSpec::transition_settle_ms); supersedes a proposal in
  // flight whose world a later change altered.
  void ReconcileLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A membership change happened, for `reason`: it opens (or extends) the
  // settle window.
  void ChangeLocked(std::string reason) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // True while changes are still settling (no proposal yet).
  bool SettlingLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The world to propose now (0: none viable) and the healthy members.
  int TargetWorldLocked(int* healthy) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ProposeLocked(int world) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sets p's moves, summary and restore. False when no proposal can be
  // made: the job failed (a range was lost with no checkpoint) or the
  // plans do not fit.
  bool PlanMovesLocked(EpochPlan& p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sets p's moves and summary from the live holders of the stable epoch
  // and returns "", or returns the first range no live member holds
  // (DescribeLost) and leaves p's moves. An error when the moves cannot be
  // planned. The model-parallel job's: each slot's moves inside the slot.
  absl::StatusOr<std::string> MemberMovesLocked(EpochPlan& p)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<std::string> ParallelMemberMovesLocked(EpochPlan& p)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AbandonLocked(const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CommitLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Every rank acked ACTIVE: the committed epoch becomes the stable one.
  void StableLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The job cannot go on: no more proposals; heartbeats answer kExit with
  // job_failed.
  void FailJobLocked(const std::string& kind, const std::string& why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool CommittedBrokenLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Gives up a transition phase that waited past the job's
  // transition_timeout_ms (event "timeout" naming who did not answer).
  void CheckTransitionTimeoutsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The committed, unstable epoch cannot become stable (a member could not
  // prepare it, or its ACTIVE acks timed out): the next reconcile proposes.
  void BreakCommittedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A member reported that a training step failed in the stable epoch
  // (worker_reports.cc): recorded, with an event, once per epoch.
  // A FAILED ack named the peer `failure.peer_rank` of `epoch`: counts
  // the link between them (event link_failed) and, when that pair failed
  // twice, excludes one end (event excluded; see LinkBook).
  void LinkFailedLocked(const Member& reporter, int64_t epoch,
                        const PrepareFailure& failure)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A broken epoch is proposed again after a back-off: none for the first
  // break, then 100 ms, doubling with each break in a row, at most 10 s
  // (reset once an epoch is stable).
  void BackOffLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StepFailedLocked(const Member& reporter, int64_t epoch,
                        const PrepareFailure& failure)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Once every member of the failed step's epoch has heartbeated since the
  // report (all alive: no lease will expire to start a transition), breaks
  // the epoch so that the next reconcile proposes the same world again.
  void CheckStepFailureLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool NeedsReplanLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Publishes `plan` in `phase` to the watchers (Publisher::Publish).
  void PublishLocked(PlanPhase phase, const EpochPlan& plan)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Stages what heartbeats answer from (Publisher::StageFacts) and tells
  // each draining member whether it may go.
  void StageFactsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The session's lease when it is live; the table's exact error
  // otherwise.
  absl::StatusOr<std::shared_ptr<MemberLease>> LiveLease(
      const std::string& worker_id, const std::string& token);
  void EventLocked(const std::string& kind, const std::string& reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records `plan` with `status` in the store batch and, with `outcome`,
  // in the reshard history.
  void RecordEpochLocked(const EpochPlan& plan, EpochStatus status,
                         bool moves_unchanged, const std::string& outcome)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SaveMetaLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends a change (Publisher::Flush): its caller waits until it is
  // durable after releasing the lock (see Change).
  void FlushLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The lock of a change: holds mu_ for its scope, then, released, waits
  // until the change's store writes are durable (group commit).
  class ABSL_SCOPED_LOCKABLE Change {
   public:
    explicit Change(Membership* m) ABSL_EXCLUSIVE_LOCK_FUNCTION(m->mu_)
        : m_(m) {
      m_->mu_.Lock();
    }
    ~Change() ABSL_UNLOCK_FUNCTION() {
      const int64_t ticket = m_->publisher_.last_ticket();
      m_->mu_.Unlock();
      m_->publisher_.WaitApplied(ticket);
    }
    Change(const Change&) = delete;
    Change& operator=(const Change&) = delete;

   private:
    Membership* const m_;
  };

  const job::JobSpec spec_;
  Clock* const clock_;
  const MembershipOptions options_;

  absl::Mutex mu_;
  MemberTable members_ ABSL_GUARDED_BY(mu_);
  // members_'s leases: thread-safe, used by heartbeats without mu_.
  LeaseBook* const leases_;
  EpochTransition transition_ ABSL_GUARDED_BY(mu_);
  TransitionHealth health_ ABSL_GUARDED_BY(mu_);
  SettleWindow settle_ ABSL_GUARDED_BY(mu_);
  WorldChoice world_ ABSL_GUARDED_BY(mu_);
  JobState job_ ABSL_GUARDED_BY(mu_);
  JobCheckpoints checkpoints_ ABSL_GUARDED_BY(mu_);
  server::ReshardHistory history_ ABSL_GUARDED_BY(mu_);
  // Its staging methods under mu_; Facts, Wait, WaitApplied and events
  // without it. Order: mu_, then the publisher's locks.
  Publisher publisher_;
};

}  // namespace zshard::server
