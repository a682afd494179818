// The worker's session with the coordinator: join, a heartbeat thread, the
// plan watch stream with transition acks, reconnection with backoff while
// the coordinator is away (the runner keeps stepping meanwhile), exit on
// fencing or a failed job, checkpoint reports, and a graceful Leave on Stop
// (after handing the worker's optimizer state over when it holds some).
// With several coordinators (high availability) every call follows the
// leader (common/net/leader_follower.h), keeping this worker's id and token
// across a failover.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "client/worker/runner/runner.h"
#include "client/worker/runner/state_table.h"
#include "client/worker/session/coordinator_kv_store.h"
#include "client/worker/session/model_intake.h"
#include "client/worker/session/telemetry_stream.h"
#include "client/worker/session/transition_handler.h"
#include "client/worker/train/train_runner.h"
#include "common/net/leader_follower.h"
#include "grpcpp/client_context.h"
#include "zshard/v1/worker_service.grpc.pb.h"

namespace zshard::worker {

// How a session ended.
enum class SessionOutcome {
  // The job's steps are done (COMMAND_EXIT, or steps reached): exit 0.
  kDone,
  // Stop() was called (SIGTERM/SIGINT) and the worker held no state to
  // hand over: left gracefully, exit 0.
  kStopped,
  // The worker handed its state over (after Stop() or an admin drain) or
  // the coordinator drained it: left gracefully, exit 0.
  kDrained,
  // The token was refused (a newer incarnation, or declared dead): exit 1.
  kFenced,
  // The runner failed for good (e.g. a plan hash mismatch) or the
  // coordinator failed the job (e.g. state lost with no checkpoint): left
  // with the reason, exit 1.
  kFailed,
};

// CoordinatorSession's life cycle as three enums, each with its allowed
// transitions in one table (coordinator_session_rpc.cc). They change on
// different threads' requests and combine freely, so each is one enum
// rather than one enum of their product; every combination that occurs is
// representable:
//  - SessionState: whether the session is alive, and whether it hands its
//    state over (a drain matters only while the session is alive).
//  - LeaveState: where this worker's Leave call stands. A Leave is in
//    flight or accepted while the session is a member, while it drains
//    (Stop() during an admin drain: kDraining with kLeaving, then kLeft
//    when the coordinator needs no handover) and after it ended (the
//    heartbeat thread ended it during the Leave, or Run()'s last Leave).
//  - StopRequest: Stop(), called from any thread at any time, and whether
//    Run() has taken it.
enum class SessionState {
  kNotJoined,  // before the first join; not alive
  kMember,     // joined, follows the job; alive
  kDraining,   // joined and handing its state over before leaving (after
               // Stop() with handover, or an admin drain); alive
  kEnded,      // the session is over (an outcome, or Stop() between
               // incarnations); not alive
};

enum class LeaveState {
  kStaying,  // no Leave in flight and none accepted
  kLeaving,  // a Leave is in flight: the coordinator may already have let
             // this worker go (End turns a fence into a stop then)
  kLeft,     // a Leave was accepted without handover: no second Leave is
             // needed, and one made anyway (steps done) changes nothing
};

enum class StopRequest {
  kNone,       // Stop() was not called
  kRequested,  // Stop() was called; Run() has not taken it yet
  kHandled,    // Run() took it (HandleStop); final
};

const char* SessionStateName(SessionState state);
const char* LeaveStateName(LeaveState state);
const char* StopRequestName(StopRequest request);

const StateTable<SessionState>& SessionStateTable();
const StateTable<LeaveState>& LeaveStateTable();
const StateTable<StopRequest>& StopRequestTable();

// One worker's session. Run() blocks on the caller's thread and starts two
// more (heartbeat, plan watch). Stop() is thread-safe.
class CoordinatorSession {
 public:
  struct Options {
    // Worker name, unique in the job (1..256 characters). Required.
    std::string name;
    // HOST:PORT where peers reach this worker for collectives. Default "".
    std::string address;
    // Topology labels such as node and zone. Default none.
    std::map<std::string, std::string> labels;
    // "cpu" (default) or "cuda".
    std::string device = "cpu";
    // Deadline of each unary RPC (with one coordinator address, a call
    // waits this long for it to come back; with several, a call to a dead
    // one fails at once and the next address is tried). Default 2000 ms.
    int64_t rpc_timeout_ms = 2000;
    // With several coordinators, how long a call that finds no leader (an
    // election lasts up to the lease TTL + 2 s) keeps asking: failure and
    // checkpoint reports, and each rendezvous call's extra time
    // (CoordinatorKvStore::Options::election_wait_ms). Default 10000 ms.
    int64_t election_wait_ms = 10000;
    // Reconnect backoff bounds for Join and the plan watch. Defaults
    // 100 ms and 2000 ms.
    int64_t min_backoff_ms = 100;
    int64_t max_backoff_ms = 2000;
    // The training runner's options (synthetic and regression jobs):
    // master dump directory, engine options. Defaults of
    // TrainRunner::Options.
    TrainRunner::Options train;
  };

  // `coordinators` must be non-null; the session shares it with its
  // rendezvous stores and telemetry stream.
  CoordinatorSession(const Options& options,
                     std::shared_ptr<net::LeaderFollower> coordinators);
  ~CoordinatorSession();
  CoordinatorSession(const CoordinatorSession&) = delete;
  CoordinatorSession& operator=(const CoordinatorSession&) = delete;

  // Joins (retrying while the coordinator is unreachable), then follows the
  // job until an outcome. Errors: a join refused for a reason other than
  // unavailability (e.g. InvalidArgument for a bad name), or a job spec
  // this worker cannot run. Call once.
  absl::StatusOr<SessionOutcome> Run();

  // Asks Run() to leave gracefully: it calls Leave; when the coordinator
  // answers handover (this worker holds optimizer state no one else has),
  // the session goes on as DRAINING, sends its state in the next epoch and
  // returns kDrained once that epoch is stable (calling Leave again);
  // otherwise it returns kStopped. Thread-safe; safe before Run() (Run then
  // returns kStopped without joining).
  void Stop();

  // Observers (thread-safe): the committed epoch applied, the runner's
  // step, and this incarnation's worker id ("" before the join).
  int64_t epoch() const;
  int64_t step() const;
  std::string worker_id() const;
  // True from a successful join until the session ends (fenced, done,
  // drained or stopped); what a liveness probe reports.
  bool alive() const;

  // A rendezvous store for `epoch` with this incarnation's credentials
  // (the communicators of that epoch rendezvous through it). Thread-safe;
  // call after the join. The store stays bound to this incarnation.
  std::unique_ptr<CoordinatorKvStore> NewKvStore(int64_t epoch) const;

  // Why the session ended kFailed ("" otherwise). Thread-safe.
  std::string failure_reason() const;

 private:
  // Result of one session incarnation: an outcome, or a request to join
  // again (the coordinator forgot this worker).
  struct Ending {
    std::optional<SessionOutcome> outcome;
  };

  absl::Status Join();
  void HeartbeatLoop();
  void WatchLoop();
  void SendAck(const TransitionAck& ack);
  // The runner's ready callback: acks ACTIVE for `epoch` when due.
  void OnEpochReady(int64_t epoch);
  absl::Status ReportCheckpoint(int64_t epoch, int64_t step, int64_t adam_step,
                                const std::string& dir,
                                const checkpoint::RankFileInfo& file);
  // The runner's failure reporter: a FAILED transition ack, or a failed
  // checkpoint report. Logged, never retried (the coordinator's timeouts
  // cover a report that is lost).
  void ReportFailure(const RunnerFailure& failure);
  // A failure that names a peer whose connection closed: tells the
  // coordinator at once (ReportSuspect), once per (epoch, peer), so a dead
  // peer is replaced without waiting out its lease.
  void ReportClosedPeer(const RunnerFailure& failure);
  // Calls Leave; returns the coordinator's handover answer (false when the
  // call failed).
  bool Leave(const std::string& reason);
  // Stop() was asked: leave, or start handing the state over.
  void HandleStop();
  // Starts handing the state over, from the stable epoch `stable`, when the
  // session is a plain member (not draining already, not ended). Returns
  // whether it started.
  bool StartDrainLocked(int64_t stable) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Draining: ends the session once an epoch after the drain is stable
  // without this worker.
  void CheckHandover();
  std::shared_ptr<TransitionHandler> handler() const;
  // Change the life cycles through their tables.
  void SetStateLocked(SessionState to) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SetLeaveLocked(LeaveState to) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SetStopLocked(StopRequest to) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::pair<std::string, std::string> Credentials() const;
  // Records the first ending; wakes Run().
  void End(std::optional<SessionOutcome> outcome, const std::string& why);
  // The coordinator answered Join with `awaiting` (the job takes its model
  // from its first trainer): waits a little for this worker's trainer and
  // sends its model (ProvideModel). OK to join again; an error ends the
  // session (the trainer's model cannot run the job).
  absl::Status GiveTrainerModel(const grpc::ClientContext& awaiting);
  // Waits up to `ms` or until the incarnation ends; true if it ended.
  bool SleepUnlessEnded(int64_t ms);
  std::unique_ptr<grpc::ClientContext> MakeContext() const;
  // Reports a unary call on `used` that failed to the follower (a
  // deadline counts as unreachable) and points the plan watch at the new
  // address when it moved.
  net::LeaderFollower::Move Follow(const net::LeaderFollower::Pick& used,
                                   const grpc::Status& status,
                                   const grpc::ClientContext& context);
  // One unary call on the leader, following redirects (CallOnLeader).
  grpc::Status CallLeader(
      const std::function<grpc::Status(v1::WorkerService::Stub&,
                                       grpc::ClientContext*)>& call);
  // CallLeader, asked again through an election (RetryThroughElection, up
  // to 10 s): for reports that nothing replays, failures and checkpoints.
  grpc::Status CallLeaderThroughElection(
      const std::function<grpc::Status(v1::WorkerService::Stub&,
                                       grpc::ClientContext*)>& call);
  // Cancels the plan watch when it reads from an address the follower has
  // left, so it reconnects to the current one.
  void RedirectWatch();

  const Options options_;
  const std::shared_ptr<net::LeaderFollower> coordinators_;
  // The trainer's model, for a job that takes it from its first trainer.
  ModelIntake intake_;

  mutable absl::Mutex mu_;
  SessionState state_ ABSL_GUARDED_BY(mu_) = SessionState::kNotJoined;
  LeaveState leave_ ABSL_GUARDED_BY(mu_) = LeaveState::kStaying;
  StopRequest stop_ ABSL_GUARDED_BY(mu_) = StopRequest::kNone;
  // kDraining: the stable epoch when the drain began.
  int64_t drain_since_epoch_ ABSL_GUARDED_BY(mu_) = 0;
  // Set when the current incarnation ends (outcome or rejoin).
  std::optional<Ending> ending_ ABSL_GUARDED_BY(mu_);
  // The watch stream's context, so ending can cancel it, and the
  // follower's generation it was opened at.
  grpc::ClientContext* watch_context_ ABSL_GUARDED_BY(mu_) = nullptr;
  uint64_t watch_generation_ ABSL_GUARDED_BY(mu_) = 0;
  std::string worker_id_ ABSL_GUARDED_BY(mu_);
  std::string token_ ABSL_GUARDED_BY(mu_);
  int64_t heartbeat_interval_ms_ ABSL_GUARDED_BY(mu_) = 1000;
  int64_t lease_timeout_ms_ ABSL_GUARDED_BY(mu_) = 5000;

  // Created at the first join (it needs the job spec); kept across rejoins.
  // The telemetry stream (training jobs only) outlives the runner.
  std::unique_ptr<TelemetryStream> telemetry_;
  std::unique_ptr<Runner> runner_;
  // Why the runner failed (kFailed), for the Leave reason.
  std::string failure_reason_ ABSL_GUARDED_BY(mu_);
  // One per incarnation (it knows the worker id); shared with the
  // runner's ready callback, which may run while a rejoin replaces it.
  std::shared_ptr<TransitionHandler> handler_ ABSL_GUARDED_BY(mu_);
  // The (epoch, rank) peers already reported as suspects: a peer whose
  // connection closed is reported once, however many of this worker's
  // groups saw it go.
  std::set<std::pair<int64_t, int>> suspects_reported_ ABSL_GUARDED_BY(mu_);
};

}  // namespace zshard::worker
