// StepEngine: one rank's ZeRO-1 step (docs/design.md section 5): reduce-scatter
// of each bucket's grads in its shard group (the instance for dense
// buffers, the expert shard group for expert ones: engine_groups.h),
// all-reduce of the owned slices across instances, the commit point (one
// world all-reduce of the non-finite count, the squared norm and the stop
// flag), Adam on the owned windows and the all-gather of each bucket (in
// its shard group) overlapped with the next bucket's Adam; and what a
// transition needs: a stop at a common step, the completion of a step left
// pending at its commit point, and an engine on state moved in from
// another epoch.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "client/worker/comm/communicator.h"
#include "client/worker/comm/kv_store.h"
#include "client/worker/device/device.h"
#include "client/worker/device/device_spec.h"
#include "client/worker/engine/engine_buffers.h"
#include "client/worker/engine/engine_groups.h"
#include "client/worker/engine/step_telemetry.h"
#include "client/worker/engine/workload.h"
#include "client/worker/optim/optimizer.h"
#include "common/job/job_slot.h"
#include "common/job/job_spec.h"
#include "common/plan/plan.h"

namespace zshard::engine {

// What the worker's session knows for an epoch: the model, its plan, this
// rank, the optimizer and a rendezvous store scoped to the epoch.
struct EngineConfig {
  plan::ModelSpec model;
  plan::Plan plan;  // made from `model` (MakePlan)
  int rank = 0;     // in [0, plan.world)
  job::OptimizerSpec optimizer;
  // Rendezvous of the intra- and inter-instance communicators; required
  // when the world has more than one rank. Not owned; must outlive Create.
  comm::KvStore* store = nullptr;
  // Prefix of the communicator group names inside `store`. Default
  // "engine".
  std::string group_prefix = "engine";
  // A model-parallel job's rank (MakeSlotEngineConfig): `model` and `plan`
  // are its slot's, `rank` its data-parallel rank; the placement maps plan
  // ranks to epoch ranks and names the commit group across slots. Empty
  // otherwise.
  SlotPlacement placement;
  // By param index: params whose squared gradient the grad norm leaves out
  // (tp_replicated params on tensor ranks other than 0, counted once, on
  // tensor rank 0). Empty: every param counts.
  std::vector<bool> norm_skips;
  // Whether this rank's loss counts in the reported loss: in a
  // model-parallel job only the last pipeline stage's tensor rank 0 (the
  // other tensor ranks compute the same loss, earlier stages none).
  bool counts_loss = true;
};

// The config of `rank` for `job` under `plan` (which the caller made with
// MakePlan(job.model, JobPlanOptions(job, world)) and checked against the
// coordinator's hash). The worker's training runner builds each epoch's
// engine with this call, MakeWorkload(job, world, rank) and
// StepEngine::Create or CreateFromState (BuildEpoch in
// client/worker/train/epoch_builder.cc), then calls Step.
EngineConfig MakeEngineConfig(const job::JobSpec& job, const plan::Plan& plan,
                              int rank, comm::KvStore* store);

// The config of a model-parallel job's rank (job::SlotJobOf(job, world,
// epoch rank)) under its slot's `plan` (MakePlan(slot.spec.model,
// JobPlanOptions(slot.spec, slot.world))): the slot's groups are named per
// slot, the commit group across slots per data-parallel rank.
EngineConfig MakeSlotEngineConfig(const job::JobSpec& job,
                                  const job::SlotJob& slot,
                                  const plan::Plan& plan, comm::KvStore* store);

class StepEngine;

struct EngineOptions {
  // Bound on each collective and on the rendezvous. Default 30 s.
  int64_t comm_timeout_ms = 30000;
  // Local address the Gloo communicators listen on. Default loopback.
  std::string hostname = "127.0.0.1";
  // How cpu ranks exchange bytes (communicator.h). Default kAuto: shared
  // memory when the group's ranks share this host, else tcp.
  comm::HostTransport host_transport = comm::HostTransport::kAuto;
  // Where the buffers, the communicators and Adam live: cpu (host memory,
  // the host communicators, CpuAdam) or cuda:N (device memory, NCCL,
  // CudaAdam). Default cpu.
  device::DeviceSpec device;
  // Param and grad buffers in memory another process maps
  // (EngineBuffers::shared_buffers: a trainer process's). Default false.
  bool shared_buffers = false;
  // Threads of the Adam kernel (0: every hardware thread). Default 0.
  int adam_threads = 0;
  // Overlap bucket k's all-gather with bucket k+1's Adam. Default true.
  bool overlap_all_gather = true;
  // Bytes per pipelined message of the host collectives. Default 0: the
  // transport's own (communicator.h).
  size_t chunk_bytes = 0;
  // Called by CreateFromState with the engine once its communicators are
  // connected, before the parameter all-gather, and with nullptr before
  // CreateFromState returns: another thread may Abort() the engine in
  // between to end that all-gather (a transition being cancelled). Default
  // none.
  std::function<void(StepEngine*)> on_connected;
  // Called on the stepping thread right after the commit point of every
  // applied step, before Adam (fault injection in tests). Default none.
  std::function<void()> after_commit;
  // Called on the stepping thread right after this rank's commit
  // all-reduce returned; a non-OK status is taken as that all-reduce
  // failing on this rank alone, after its peers got the reduced values
  // (fault injection in tests: the commit-pending case). Default none.
  std::function<absl::Status()> commit_fault;
};

// Thread-compatible: one Step at a time; Abort() may be called from any
// thread. Owns its buffers and communicators.
class StepEngine {
 public:
  // Allocates the buffers (initial params from `workload`), joins the
  // rendezvous of the intra-instance group (D ranks), with expert_parallel
  // E > 1 the expert shard group (D / E ranks) and, when I > 1, the
  // inter-instance group (engine_groups.h); blocks until every peer has
  // joined or the timeout passes.
  // InvalidArgument for a bad config; the communicator's status otherwise.
  static absl::StatusOr<std::unique_ptr<StepEngine>> Create(
      const EngineConfig& config, const EngineOptions& options,
      const Workload& workload);

  // An engine of `config` on `buffers` (made by EngineBuffers::Create for
  // config's plan and rank, on options.device) whose owned windows already hold
  // the optimizer state after training step `step` with `adam_step` Adam
  // updates (filled by reshard::StateMover or a checkpoint). Joins the epoch's
  // rendezvous like Create, then writes every owned master into its param
  // window (rounded as Adam rounds) and all-gathers every bucket in the
  // instance, so that every param buffer is complete. step() and adam_step()
  // start at the given values, so bias correction goes on as if undisturbed; a
  // step
  // - adam_step gap counts as skipped steps. InvalidArgument for a bad
  // config, buffers of another plan, rank or device, or bad counters; the
  // communicator's status otherwise (the engine is then discarded).
  static absl::StatusOr<std::unique_ptr<StepEngine>> CreateFromState(
      const EngineConfig& config, const EngineOptions& options,
      std::unique_ptr<EngineBuffers> buffers, int64_t step, int64_t adam_step);

  ~StepEngine();
  StepEngine(const StepEngine&) = delete;
  StepEngine& operator=(const StepEngine&) = delete;

  // Runs training step step()+1: the workload's gradients, then the ZeRO-1
  // step. Returns OK for an applied or skipped step. On a communicator error
  // before the commit point the optimizer state and params are unchanged
  // (the step can be redone on new communicators); after it, Adam is
  // finished and the all-gather's error returned (telemetry.outcome says
  // which). After an error every communicator of this engine is aborted.
  // `stop_requested` travels in the commit all-reduce: when any rank sets
  // it, every rank's result has stop = true (see StepResult).
  //
  // When the workload defers_param_gather() (overlap_param_gather), Step
  // returns after Adam and StepFinished with the buckets' all-gathers
  // running on another thread, in forward order, each reported through
  // Workload::ParamsGathered; the next Step waits for them before its
  // first collective (a gather error fails that step before its commit
  // point), as do FinishPendingStep and the destructor.
  StepResult Step(Workload& workload, bool stop_requested = false);

  // Completes the step whose result had commit_pending, with the
  // commit_values of a rank that passed that step's commit point: skips it
  // or runs Adam (clipped as that rank did) on every owned window exactly
  // as the step would have, counters included; no collective runs (the
  // params outside this rank's windows are stale until the next epoch's
  // all-gather). Afterwards step() is one higher. FailedPrecondition when
  // no step is pending (a later Step drops a pending one);
  // InvalidArgument for values of the wrong size.
  absl::Status FinishPendingStep(absl::Span<const double> commit_values);

  // True after a Step whose result had commit_pending, until it is
  // finished or another Step runs.
  bool commit_pending() const { return commit_pending_; }

  // Aborts every communicator: pending and later collectives fail, here and
  // (as connections drop) at the peers. Thread-safe, idempotent.
  void Abort();

  // Training steps run (applied, skipped or failed after the commit).
  int64_t step() const { return step_; }
  // Adam updates applied.
  int64_t adam_step() const { return adam_step_; }
  int64_t skipped_steps() const { return skipped_steps_; }

  // The buffers stay valid (and readable, e.g. as a StateMover source)
  // after the communicators failed or were aborted.
  EngineBuffers& buffers() { return *buffers_; }
  const EngineBuffers& buffers() const { return *buffers_; }

 private:
  // The commit all-reduce's elements: non-finite count / I, squared norm /
  // I, summed loss, stop requests.
  static constexpr int kCommitValues = 4;
  using CommitArray = std::array<float, kCommitValues>;

  StepEngine(const EngineConfig& config, const EngineOptions& options);
  // What Create and CreateFromState share: Validate checks the config
  // (before any allocation); Connect makes the Adam kernel of the buffers'
  // device and joins the communicators' rendezvous.
  absl::Status Validate() const;
  absl::Status Connect();
  // Step's ZeRO-1 part, on the gradients the workload wrote into
  // buffers(): `local_loss` is this rank's summed loss (when has_loss) and
  // the summed gradients are divided by `global_batch` (>= 1).
  // The reductions a streaming workload's step already ran
  // (StreamGradients), and whether the step's gradients are discarded.
  struct Reduction {
    absl::Status status;
    double reduce_scatter = 0;
    double inter_allreduce = 0;
    bool discard = false;
  };
  // `reduced`: null to reduce the gradients here.
  StepResult StepOnBuffers(int64_t global_batch, double local_loss,
                           bool has_loss, bool stop_requested,
                           const Reduction* reduced);
  // Reduce-scatters every window in its shard group, then all-reduces the
  // owned slices across instances. With a `stream`, each window waits for
  // its bucket to be ready first.
  absl::Status ReduceGradients(StepTelemetry& t, GradientStream* stream);
  // The workload's gradients with the reductions running on another thread
  // as its buckets become ready (gradient_stream.h).
  absl::StatusOr<double> StreamGradients(Workload& workload,
                                         Reduction& reduction);
  // Local norm and count, then the world all-reduce of the commit values;
  // `discard` counts a non-finite gradient, so every rank skips the step.
  // Whether param `p`'s squared gradient stays out of the norm here
  // (EngineConfig::norm_skips).
  bool SkipsInNorm(int p) const {
    return p >= 0 && p < static_cast<int>(config_.norm_skips.size()) &&
           config_.norm_skips[static_cast<size_t>(p)];
  }
  absl::StatusOr<CommitArray> Commit(double local_loss, bool stop_requested,
                                     bool discard, StepTelemetry& t);
  // Past the commit point: counts the step, then skips it or runs Adam
  // (with the all-gathers when `gather`). Returns Adam's or the first
  // all-gather's error; telemetry says which.
  absl::Status ApplyCommitted(const CommitArray& values, StepTelemetry& t,
                              bool gather);
  // Adam on every window, each bucket's all-gather (when `gather`)
  // overlapping the next window's Adam; returns the first all-gather error.
  absl::Status UpdateAndGather(StepTelemetry& t, bool gather);
  absl::Status AllGather(int w);
  // Writes every owned master into its param window and all-gathers every
  // bucket (CreateFromState).
  absl::Status PublishParams();
  void CountTraffic(StepTelemetry& t) const;
  // overlap_param_gather (step_engine_gather.cc). The windows in forward
  // order: by the first registered param of their bucket.
  std::vector<int> ForwardWindows() const;
  // All-gathers every window on gatherer_, in forward order, telling
  // `workload` of each (ParamsGathered); the first error fails the rest
  // without a collective.
  void StartGathers(Workload& workload);
  // Waits for gatherer_; the first gather error of the last deferred step,
  // OK when none.
  absl::Status JoinGathers();

  const EngineConfig config_;
  const EngineOptions options_;
  // Owns the device: declared first, so everything below goes before it.
  std::unique_ptr<EngineBuffers> buffers_;
  EngineGroups groups_;  // which communicator each buffer uses
  std::unique_ptr<optim::Optimizer> adam_;
  // The commit values in device memory for the all-reduce; empty when the
  // world is one rank.
  device::Buffer commit_buffer_;
  optim::AdamHyper hyper_;
  int64_t step_ = 0;
  int64_t adam_step_ = 0;
  int64_t skipped_steps_ = 0;
  int64_t global_batch_ = 1;  // of the workload of the running step
  bool commit_pending_ = false;
  // The running step's workload asked to defer the all-gathers, and
  // UpdateAndGather left them for StartGathers.
  bool defer_gather_ = false;
  bool gathers_deferred_ = false;
  std::thread gatherer_;
  absl::Status gather_status_;  // gatherer_'s; read after joining it
};

}  // namespace zshard::engine
