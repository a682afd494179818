// TrainerHub: the daemon's end of the trainer socket (--trainer-socket). It
// accepts one trainer process at a time, checks its hello (protocol
// version, job, model against the job's spec), and runs each step's
// exchange with it: the buffers' layout when they changed, the step, the
// wait for its backward pass, the result. A second trainer, a trainer of
// another job or of another model is refused with one error line, and the
// attached one keeps training.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "client/worker/device/fd_passing.h"
#include "client/worker/engine/gradient_stream.h"
#include "client/worker/engine/model_state.h"
#include "common/plan/model_spec.h"
#include "common/plan/plan.h"
#include "nlohmann/json.hpp"

namespace zshard::trainer {

struct TrainerHubOptions {
  // Path of the Unix socket; a stale socket file there is replaced, a live
  // one (another daemon answers) is refused. Required.
  std::string socket_path;
  // The job's name and model: a trainer's hello must match them. Empty
  // (a job that takes its model from its first trainer, before it has
  // one): any job name and any valid model are taken; see AdoptJob.
  std::string job_name;
  plan::ModelSpec model;
  // Bound on each message's exchange with a trainer that is attached and
  // answering (not on its forward/backward pass). Default 10 s.
  int64_t io_timeout_ms = 10000;
  // Called, with no lock held, for what the coordinator must hear of:
  // ("trainer_refused", why), ("trainer_lost", why) when an attached
  // trainer went away or broke the protocol, ("trainer_attached", who)
  // for every attach after the first. Must not block long. Default none.
  std::function<void(const std::string& kind, const std::string& reason)>
      on_event;
};

// The buffers of one epoch as the trainer maps them (dtypes, sizes, where
// each param starts, the buckets, the segments' fds); a new generation is
// sent to the trainer before its next step.
using TrainerLayout = engine::SharedBuffers;

// Where a model-parallel job's trainer sits (docs/design.md section 13) and
// how the trainers of its replica meet for their own torch.distributed
// groups: the TCPStore that the trainer at replica rank 0 hosts at
// `init_method`, with keys under `generation`, which changes whenever the
// replica's members change (the trainers then rebuild their groups).
struct ModelParallelStep {
  int tp = 0;
  int pp = 0;
  int cp = 0;
  int replica = 0;
  int tensor = 1;    // T
  int pipeline = 1;  // P
  int context = 1;   // C
  // In the replica: tp + T x (cp + C x pp) (plan/parallel.h's rank order
  // without the replica); the replica has T x P x C ranks.
  int rank = 0;
  std::string init_method;  // "tcp://HOST:PORT"; empty before a rendezvous
  int64_t generation = 0;
};

// Adds `position`'s fields to a step message (trainer_protocol.h).
void AddModelParallel(const ModelParallelStep& position,
                      nlohmann::json& message);

struct TrainerStep {
  int64_t step = 0;  // 1-based
  // The data-parallel rank and size whose samples this trainer takes: the
  // world's rank and size, or a model-parallel job's replica and replicas.
  int rank = 0;
  int world = 1;
  int64_t global_batch = 1;
  double lr = 0;
  int64_t steps = 0;  // the job's length (0: unknown)
  // Applied before a rollback to a checkpoint: this step runs again.
  bool repeated = false;
  std::optional<ModelParallelStep> model_parallel = std::nullopt;
};

struct BackwardDone {
  bool has_loss = false;
  double loss = 0;  // this rank's summed loss
  // The trainer waits for each bucket's params in its forward pre-hooks:
  // the all-gather may run after the result (SendGathered).
  bool overlap_param_gather = false;
};

struct TrainerStepResult {
  int64_t step = 0;
  // The step did not complete on this daemon (a peer was lost): the world
  // re-shards, and the trainer's next step is this one again, or the next
  // if another rank completed it.
  bool failed = false;
  bool applied = false;
  double grad_norm = 0;
  std::optional<double> loss;  // the world's summed loss / B
  // Buckets whose all-gather runs after this result: SendGathered follows
  // for each.
  int deferred_gathers = 0;
};

// Thread-safe. Owns the listening socket (unlinked on destruction) and an
// accept thread.
class TrainerHub {
 public:
  static absl::StatusOr<std::unique_ptr<TrainerHub>> Start(
      const TrainerHubOptions& options);
  ~TrainerHub();
  TrainerHub(const TrainerHub&) = delete;
  TrainerHub& operator=(const TrainerHub&) = delete;

  // Blocks until a trainer is attached, at most `timeout_ms`
  // (DeadlineExceeded naming the socket) or until Shutdown (Cancelled).
  absl::Status WaitForTrainer(int64_t timeout_ms);

  // Sends `layout` (when this trainer has not seen its generation) and
  // `step`, then waits for the trainer's backward_done, at most
  // `timeout_ms` in all. The buckets the trainer signals complete on the
  // way (bucket_ready) are marked in `stream`, and a discard (the trainer
  // saw its gradients go wrong after handing some over) discards the
  // stream's step; without a stream both are ignored (the grads are read
  // once backward is done, late gradients included). Unavailable when the
  // trainer left or broke the protocol (it is dropped; WaitForTrainer
  // waits for the next one, which gets the layout again);
  // FailedPrecondition when none is attached.
  absl::StatusOr<BackwardDone> RunBackward(
      const TrainerLayout& layout, const TrainerStep& step, int64_t timeout_ms,
      engine::GradientStream* stream = nullptr);

  // The attached trainer's initial params: every param's values as fp32,
  // flattened in registration order (`numel` in all), through a shared
  // segment. Waits at most `timeout_ms`; Unavailable when the trainer left
  // (dropped); FailedPrecondition when none is attached.
  absl::StatusOr<std::vector<float>> FetchInitialParams(int64_t numel,
                                                        int64_t timeout_ms);

  // Sends the step's result to the attached trainer (dropped silently when
  // it has gone: the next RunBackward notices).
  void SendResult(const TrainerStepResult& result);

  // overlap_param_gather: bucket `bucket` of buffer `buffer` holds step
  // `step`'s params (ok) or its all-gather failed. Sent to the trainer
  // that got the step's result, if it is still attached; thread-safe, and
  // does not wait for a step's exchange (the trainer reads it during its
  // next forward). A layout (for a new trainer or a new generation) waits
  // until every bucket of the last deferred result was reported.
  void SendGathered(int64_t step, int buffer, int bucket, bool ok);

  // Why the daemon is not stepping (the coordinator's words; empty: it
  // is). A change is sent to the attached trainer between its steps
  // ({"type": "waiting", "reason": ...}; skipped while a step's exchange
  // holds the connection), and the current reason to each new trainer.
  void SetWaiting(const std::string& why);

  // Tells the attached trainer that the job's steps are done (and every
  // trainer waiting for its position).
  void SendDone(bool failed = false, const std::string& reason = "");

  // A model-parallel job: this daemon's position (none while a spare) and
  // its slot's model, which hellos are checked against from now on
  // (AdoptJob). Trainers that asked for the position (a first message
  // "position_query") get it and are closed; while there is none they
  // wait. Unlike an attached trainer's, their connections do not hold the
  // hub. Returns AdoptJob's status.
  absl::Status SetPosition(const std::optional<ModelParallelStep>& position,
                           const std::string& job_name,
                           const plan::ModelSpec& slot_model);

  // Wakes WaitForTrainer callers with Cancelled and stops accepting.
  void Shutdown();

  // The job's name and model, once a daemon started before them (a job
  // that takes its model from its first trainer) knows them: later hellos
  // are checked against them, and an attached trainer whose model differs
  // is refused (InvalidArgument naming the difference; it is dropped).
  absl::Status AdoptJob(const std::string& job_name,
                        const plan::ModelSpec& model);
  // The model object the attached trainer's hello carried (JSON text);
  // none when no trainer is attached.
  std::optional<std::string> AttachedModel() const;
  // Replaces TrainerHubOptions::on_event.
  void SetEventHandler(
      std::function<void(const std::string& kind, const std::string& reason)>
          on_event);
  std::string job_name() const;

  bool attached() const;
  // Trainers attached so far (a restarted trainer counts again).
  int64_t attach_count() const;

 private:
  explicit TrainerHub(TrainerHubOptions options);
  absl::Status Listen();
  void AcceptLoop();
  // Reads and checks a new connection's hello; attaches it or answers with
  // an error and closes it.
  void Admit(device::OwnedFd conn);
  // The reason to refuse `hello`, or OK.
  absl::Status CheckHello(const nlohmann::json& hello) const;
  void Drop() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A position_query: answered now or kept in position_waiters_.
  void AnswerPosition(device::OwnedFd conn, const nlohmann::json& query);
  // The message for a trainer that asked for the position.
  nlohmann::json PositionMessage() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The attached trainer's fd (-1 when none) and the Unavailable status of
  // a conversation that failed on it (which drops it).
  int Conn() const;
  absl::Status Fail(const absl::Status& why);
  void Notify(const std::string& kind, const std::string& reason) const;

  const TrainerHubOptions options_;
  device::OwnedFd listen_fd_;
  device::OwnedFd wake_fd_;  // eventfd: ends the accept loop
  std::thread accept_thread_;

  mutable absl::Mutex mu_;
  device::OwnedFd conn_ ABSL_GUARDED_BY(mu_);
  int trainer_pid_ ABSL_GUARDED_BY(mu_) = 0;
  // Generation of the last layout this trainer got; -1: none.
  int64_t sent_generation_ ABSL_GUARDED_BY(mu_) = -1;
  int64_t attach_count_ ABSL_GUARDED_BY(mu_) = 0;
  // SetWaiting's reason, and the one the attached trainer was sent.
  std::string waiting_ ABSL_GUARDED_BY(mu_);
  std::string sent_waiting_ ABSL_GUARDED_BY(mu_);
  // What hellos are checked against (options_'s until AdoptJob).
  std::string job_name_ ABSL_GUARDED_BY(mu_);
  plan::ModelSpec model_ ABSL_GUARDED_BY(mu_);
  std::string attached_model_ ABSL_GUARDED_BY(mu_);  // JSON text
  std::function<void(const std::string&, const std::string&)> on_event_
      ABSL_GUARDED_BY(mu_);
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  // SetPosition's, the job's end (done_), and who waits for a position.
  std::optional<ModelParallelStep> position_ ABSL_GUARDED_BY(mu_);
  std::optional<nlohmann::json> done_ ABSL_GUARDED_BY(mu_);
  std::vector<device::OwnedFd> position_waiters_ ABSL_GUARDED_BY(mu_);
  // Serialises step exchanges (one conversation at a time).
  absl::Mutex io_mu_;
  // Deferred buckets of the last result still to be reported, and the
  // attach (attach_count_) of the trainer that got that result.
  int gathers_left_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t gathers_for_ ABSL_GUARDED_BY(mu_) = 0;
  // Serialises writes to the connection: SendGathered writes while a
  // step's exchange holds io_mu_. Taken after mu_ when both are held.
  absl::Mutex send_mu_;
  absl::Status Send(int fd, const nlohmann::json& body,
                    absl::Span<const int> fds = {});
};

// The reason a trainer's model (the job spec's model object it sent) does
// not match the job's, naming the param and field; OK when it matches.
absl::Status CheckTrainerModel(const plan::ModelSpec& job_model,
                               const nlohmann::json& trainer_model);

}  // namespace zshard::trainer
