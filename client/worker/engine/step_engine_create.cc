// StepEngine: creation, on fresh buffers (Create) or on buffers that already
// hold a step's optimizer state (CreateFromState, after a re-shard or a
// restore), and the communicators both join.
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/worker/engine/step_engine.h"
#include "common/status.h"

namespace zshard::engine {
namespace {

// The communicators' backend for the engine's device: the host
// collectives for host memory, NCCL for CUDA memory.
comm::CommDevice CommDeviceOf(const device::DeviceSpec& spec) {
  switch (spec.kind) {
    case device::DeviceKind::kCpu:
      break;
    case device::DeviceKind::kCuda:
      return comm::CommDevice::kCuda;
  }
  return comm::CommDevice::kCpu;
}

}  // namespace

EngineConfig MakeEngineConfig(const job::JobSpec& job, const plan::Plan& plan,
                              int rank, comm::KvStore* store) {
  EngineConfig config;
  config.model = job.model;
  config.plan = plan;
  config.rank = rank;
  config.optimizer = job.optimizer;
  config.store = store;
  config.group_prefix = absl::StrCat("engine/", job.name);
  return config;
}

EngineConfig MakeSlotEngineConfig(const job::JobSpec& job,
                                  const job::SlotJob& slot,
                                  const plan::Plan& plan,
                                  comm::KvStore* store) {
  EngineConfig config = MakeEngineConfig(slot.spec, plan, slot.rank, store);
  if (!job.parallel.model_parallel()) return config;
  const plan::Position& pos = slot.position;
  config.group_prefix = absl::StrCat("engine/", job.name, "/slot/", slot.slot);
  config.placement.epoch_ranks = slot.group;
  config.placement.across.name =
      absl::StrCat("engine/", job.name, "/across/", slot.rank);
  config.placement.across.rank = slot.slot;
  config.placement.across.members = slot.across;
  config.norm_skips.reserve(config.model.params.size());
  for (const plan::ParamSpec& param : config.model.params) {
    config.norm_skips.push_back(!plan::CountsInGradNorm(param, pos.tp));
  }
  config.counts_loss = pos.tp == 0 && pos.pp == job.parallel.pipeline - 1;
  return config;
}

StepEngine::StepEngine(const EngineConfig& config, const EngineOptions& options)
    : config_(config), options_(options) {
  hyper_.lr = config.optimizer.lr;
  hyper_.beta1 = config.optimizer.beta1;
  hyper_.beta2 = config.optimizer.beta2;
  hyper_.eps = config.optimizer.eps;
  hyper_.weight_decay = config.optimizer.weight_decay;
}

StepEngine::~StepEngine() { (void)JoinGathers(); }

absl::StatusOr<std::unique_ptr<StepEngine>> StepEngine::Create(
    const EngineConfig& config, const EngineOptions& options,
    const Workload& workload) {
  ZSHARD_RETURN_IF_ERROR(plan::CheckRank(config.plan, config.rank));
  if (workload.global_batch() < 1) {
    return absl::InvalidArgumentError(
        "step engine: the workload's global batch must be >= 1");
  }
  std::unique_ptr<StepEngine> engine(new StepEngine(config, options));
  ZSHARD_RETURN_IF_ERROR(engine->Validate());
  ZSHARD_ASSIGN_OR_RETURN(
      engine->buffers_,
      EngineBuffers::Create(config.model, config.plan, config.rank, workload,
                            options.device, options.shared_buffers));
  ZSHARD_RETURN_IF_ERROR(engine->Connect());
  return engine;
}

absl::StatusOr<std::unique_ptr<StepEngine>> StepEngine::CreateFromState(
    const EngineConfig& config, const EngineOptions& options,
    std::unique_ptr<EngineBuffers> buffers, int64_t step, int64_t adam_step) {
  ZSHARD_RETURN_IF_ERROR(plan::CheckRank(config.plan, config.rank));
  if (buffers == nullptr) {
    return absl::InvalidArgumentError("step engine: buffers are required");
  }
  if (buffers->plan().hash != config.plan.hash ||
      buffers->rank_plan().rank != config.rank) {
    return absl::InvalidArgumentError(absl::StrCat(
        "step engine: the buffers are of plan ", buffers->plan().hash, " rank ",
        buffers->rank_plan().rank, ", not of plan ", config.plan.hash, " rank ",
        config.rank));
  }
  if (buffers->device().spec() != options.device) {
    return absl::InvalidArgumentError(
        absl::StrCat("step engine: the buffers are on device ",
                     device::DeviceSpecName(buffers->device().spec()),
                     ", not on ", device::DeviceSpecName(options.device)));
  }
  if (step < 0 || adam_step < 0 || adam_step > step) {
    return absl::InvalidArgumentError(absl::StrCat(
        "step engine: bad counters: step ", step, ", adam step ", adam_step));
  }
  std::unique_ptr<StepEngine> engine(new StepEngine(config, options));
  ZSHARD_RETURN_IF_ERROR(engine->Validate());
  engine->buffers_ = std::move(buffers);
  engine->step_ = step;
  engine->adam_step_ = adam_step;
  engine->skipped_steps_ = step - adam_step;
  ZSHARD_RETURN_IF_ERROR(engine->Connect());
  if (options.on_connected) options.on_connected(engine.get());
  absl::Status published = engine->PublishParams();
  if (options.on_connected) options.on_connected(nullptr);
  if (!published.ok()) {
    engine->Abort();
    return published;
  }
  return engine;
}

absl::Status StepEngine::Validate() const {
  if (config_.plan.world > 1 && config_.store == nullptr) {
    return absl::InvalidArgumentError(
        "step engine: a rendezvous store is required when world > 1");
  }
  // Bad hyperparameters must fail here, not after a commit point.
  ZSHARD_RETURN_IF_ERROR(optim::MakeAdamStepParams(hyper_, 1, 1.0).status());
  if (config_.optimizer.clip_grad_norm < 0) {
    return absl::InvalidArgumentError(
        "step engine: clip_grad_norm must be >= 0");
  }
  return absl::OkStatus();
}

absl::Status StepEngine::Connect() {
  device::Device& dev = buffers_->device();
  device::AdamOptions adam_options;
  adam_options.threads = options_.adam_threads;
  ZSHARD_ASSIGN_OR_RETURN(adam_, dev.CreateAdam(adam_options));

  comm::CommOptions co;
  co.store = config_.store;
  co.timeout_ms = options_.comm_timeout_ms;
  co.hostname = options_.hostname;
  co.host_transport = options_.host_transport;
  co.chunk_bytes = options_.chunk_bytes;
  co.device = CommDeviceOf(dev.spec());
  co.cuda_device = dev.spec().ordinal;
  if (config_.plan.world > 1 || config_.placement.across.size() > 1) {
    ZSHARD_ASSIGN_OR_RETURN(
        commit_buffer_,
        dev.Allocate(device::MemoryCategory::kComm, sizeof(CommitArray)));
  }
  return groups_.NameEpochPeer(groups_.Connect(
      config_.plan, config_.rank, config_.group_prefix, co, config_.placement));
}

absl::Status StepEngine::PublishParams() {
  std::vector<WindowState>& windows = buffers_->windows();
  for (size_t w = 0; w < windows.size(); ++w) {
    const WindowState& win = windows[w];
    // fp32 params are their own master: nothing to write.
    if (win.master.empty()) continue;
    BufferState& b = buffers_->buffers()[win.buffer];
    const int64_t pb = plan::DTypeBytes(b.key.param_dtype);
    ZSHARD_RETURN_IF_ERROR(buffers_->device().CastToParam(
        buffers_->master(static_cast<int>(w)), b.params.at(win.start * pb),
        b.key.param_dtype, win.segments, win.size()));
  }
  for (size_t w = 0; w < windows.size(); ++w) {
    if (groups_.shard_group(windows[w].buffer) == nullptr) continue;
    ZSHARD_RETURN_IF_ERROR(AllGather(static_cast<int>(w)));
  }
  return absl::OkStatus();
}

void StepEngine::Abort() { groups_.Abort(); }

}  // namespace zshard::engine
