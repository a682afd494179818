// EpochBuilder: the COMMITTED phase of one epoch on this worker.

#include "client/worker/train/epoch_builder.h"

#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/worker/comm/failed_peer.h"
#include "client/worker/engine/workload_factory.h"
#include "client/worker/reshard/abortable_store.h"
#include "common/logging.h"
#include "common/plan/plan.h"
#include "common/status.h"

namespace zshard::worker {

bool IsRecoverable(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kCancelled:
    case absl::StatusCode::kDataLoss:
    case absl::StatusCode::kUnknown:
      return true;
    default:
      return false;
  }
}

RunnerFailure PreparationFailure(const EpochInfo& epoch,
                                 const absl::Status& status) {
  RunnerFailure f;
  f.kind = RunnerFailure::Kind::kPreparation;
  f.epoch = epoch.epoch;
  f.rank = epoch.rank;
  f.error = std::string(status.message());
  if (epoch.restore && status.code() == absl::StatusCode::kDataLoss) {
    f.source = epoch.restore_dir;
    f.source_is_checkpoint = true;
  } else {
    f.source = reshard::FailedSourceMember(status);
  }
  NameFailedPeer(epoch, status, &f);
  return f;
}

void NameFailedPeer(const EpochInfo& epoch, const absl::Status& status,
                    RunnerFailure* failure) {
  std::optional<comm::FailedPeer> peer =
      comm::FailedPeerOf(status, comm::kEpochPeerPayload);
  if (!peer.has_value()) {
    const std::string member = reshard::FailedLinkMember(status);
    std::optional<comm::FailedPeer> link = comm::FailedPeerOf(status);
    if (member.empty() || !link.has_value()) return;
    for (const plan::Assignment& a : epoch.assignments) {
      if (a.worker_id == member && a.rank >= 0) {
        peer = link;
        peer->rank = a.rank;
      }
    }
  }
  if (!peer.has_value() || peer->rank == epoch.rank) return;
  failure->peer_rank = peer->rank;
  failure->peer_group = peer->group;
  failure->peer_closed = peer->closed;
}

absl::StatusOr<plan::Plan> CheckedPlan(const job::JobSpec& job, int world,
                                       int64_t epoch,
                                       const std::string& plan_hash,
                                       const job::SlotJob* slot) {
  // A model-parallel job's epoch carries the whole parallel plan's hash;
  // this rank makes only its slot's plan.
  const bool parallel = slot != nullptr && job.parallel.model_parallel();
  absl::StatusOr<plan::Plan> plan =
      parallel ? plan::MakePlan(slot->spec.model,
                                job::JobPlanOptions(slot->spec, slot->world))
               : plan::MakePlan(job.model, job::JobPlanOptions(job, world));
  if (!plan.ok()) {
    return absl::Status(
        plan.status().code(),
        absl::StrCat("plan for world ", world,
                     parallel ? absl::StrCat(" (slot ", slot->slot, ")") : "",
                     ": ", plan.status().message()));
  }
  const std::string mine =
      parallel ? job::ParallelJobHash(job, world) : plan->hash;
  if (mine != plan_hash) {
    return absl::FailedPreconditionError(absl::StrCat(
        "plan hash mismatch for world ", world, " in epoch ", epoch,
        ": coordinator '", plan_hash, "', this worker '", mine, "'"));
  }
  return plan;
}

void LogEngineMemory(const char* what, int64_t step,
                     const engine::MemoryBytes& memory) {
  ZSHARD_LOG_INFO(what, {{"step", absl::StrCat(step)},
                         {"param_bytes", absl::StrCat(memory.param)},
                         {"grad_bytes", absl::StrCat(memory.grad)},
                         {"master_bytes", absl::StrCat(memory.master)},
                         {"exp_avg_bytes", absl::StrCat(memory.exp_avg)},
                         {"exp_avg_sq_bytes", absl::StrCat(memory.exp_avg_sq)},
                         {"comm_bytes", absl::StrCat(memory.comm)},
                         {"total_bytes", absl::StrCat(memory.total())}});
}

bool SendsState(const EpochInfo& epoch) {
  for (const plan::Move& m : epoch.moves) {
    if (m.source == plan::MoveSource::kMember &&
        m.source_member == epoch.worker_id) {
      return true;
    }
  }
  return false;
}

namespace {

// Brings the base engine to resume_step when its commit was pending.
absl::Status FinishPending(const EpochInfo& epoch, const BuildInput& input) {
  if (!epoch.finish_pending_step || input.base == nullptr ||
      input.base->engine == nullptr || !input.base_commit_pending ||
      input.base->engine->step() + 1 != epoch.resume_step) {
    return absl::OkStatus();
  }
  ZSHARD_RETURN_IF_ERROR(
      input.base->engine->FinishPendingStep(epoch.commit_values));
  ZSHARD_LOG_INFO(
      "pending step finished",
      {{"step", absl::StrCat(input.base->engine->step())},
       {"adam_step", absl::StrCat(input.base->engine->adam_step())}});
  return absl::OkStatus();
}

// Whether this worker's base state is of the slot it holds now (always in
// a job without model parallelism).
bool SameSlot(const job::JobSpec& job, const BuildInput& input,
              const std::optional<job::SlotJob>& now) {
  if (!job.parallel.model_parallel() || !now.has_value() ||
      input.base == nullptr || input.base->epoch.rank < 0) {
    return true;
  }
  absl::StatusOr<job::SlotJob> before =
      job::SlotJobOf(job, input.base->epoch.world, input.base->epoch.rank);
  return before.ok() && before->slot == now->slot;
}

}  // namespace

absl::StatusOr<std::unique_ptr<HeldEngine>> BuildEpoch(BuildInput input) {
  const EpochInfo& epoch = input.epoch;
  const job::JobSpec& job = *input.job;
  ZSHARD_RETURN_IF_ERROR(FinishPending(epoch, input));
  const engine::EngineBuffers* old_state = nullptr;
  if (!epoch.restore && input.base != nullptr &&
      input.base->engine != nullptr &&
      input.base->epoch.epoch == epoch.base_epoch) {
    const engine::StepEngine& base = *input.base->engine;
    if (base.step() != epoch.resume_step) {
      return absl::InternalError(
          absl::StrCat("state of step ", base.step(), " (epoch ",
                       input.base->epoch.epoch, ") cannot join epoch ",
                       epoch.epoch, " at resume step ", epoch.resume_step));
    }
    old_state = &base.buffers();
  }

  auto held = std::make_unique<HeldEngine>();
  held->epoch = epoch;
  held->store = input.new_store(epoch.epoch);
  if (held->store != nullptr) {
    held->abortable_store = std::make_unique<reshard::AbortableStore>(
        held->store.get(), input.cancelled);
  }
  comm::KvStore* store = held->abortable_store.get();
  std::unique_ptr<engine::EngineBuffers> buffers;
  std::optional<plan::Plan> plan;
  // Everything this rank holds is its slot's (the job itself without model
  // parallelism): model, plan, workload and buffers.
  std::optional<job::SlotJob> slot;
  if (epoch.rank >= 0) {
    ZSHARD_ASSIGN_OR_RETURN(slot, job::SlotJobOf(job, epoch.world, epoch.rank));
    ZSHARD_ASSIGN_OR_RETURN(plan, CheckedPlan(job, epoch.world, epoch.epoch,
                                              epoch.plan_hash, &*slot));
    if (input.before_workload && store != nullptr) {
      ZSHARD_RETURN_IF_ERROR(input.before_workload(*slot, *store));
    }
    // The job's first epoch starts from the workload's initial params.
    const bool fresh = epoch.base_epoch == 0 && !epoch.restore;
    ZSHARD_ASSIGN_OR_RETURN(
        held->workload,
        input.make_workload
            ? input.make_workload(slot->spec, slot->world, slot->rank, fresh)
            : engine::MakeWorkload(slot->spec, slot->world, slot->rank));
    if (fresh) {
      engine::EngineConfig config =
          engine::MakeSlotEngineConfig(job, *slot, *plan, store);
      ZSHARD_ASSIGN_OR_RETURN(
          held->engine,
          engine::StepEngine::Create(config, input.options, *held->workload));
      return held;
    }
    ZSHARD_ASSIGN_OR_RETURN(
        buffers, engine::EngineBuffers::Create(
                     slot->spec.model, *plan, slot->rank, *held->workload,
                     input.options.device, input.options.shared_buffers));
  }
  if (buffers != nullptr || SendsState(epoch)) {
    reshard::MoveInput move;
    move.self = epoch.worker_id;
    move.old_state = old_state;
    move.new_state = buffers.get();
    move.keep_local = SameSlot(job, input, slot);
    move.moves = epoch.moves;
    move.checkpoint_files = epoch.checkpoint_files;
    move.checkpoint_dir = epoch.restore_dir;
    move.store = store;
    move.timeout_ms = input.options.comm_timeout_ms;
    move.hostname = input.options.hostname;
    move.host_transport = input.options.host_transport;
    reshard::StateMover mover(std::move(move));
    if (input.set_mover) input.set_mover(&mover);
    absl::StatusOr<reshard::MoveStats> stats = mover.Run();
    if (input.set_mover) input.set_mover(nullptr);
    if (!stats.ok()) {
      return reshard::WithContext(
          stats.status(), absl::StrCat("state moves of epoch ", epoch.epoch));
    }
    ZSHARD_LOG_INFO(
        "state moved",
        {{"epoch", absl::StrCat(epoch.epoch)},
         {"bytes_sent", absl::StrCat(stats->bytes_sent)},
         {"bytes_received", absl::StrCat(stats->bytes_received)},
         {"bytes_kept", absl::StrCat(stats->bytes_kept)},
         {"bytes_from_checkpoint", absl::StrCat(stats->bytes_from_checkpoint)},
         {"seconds", absl::StrCat(stats->seconds)}});
  }
  if (buffers == nullptr) return held;
  engine::EngineConfig config =
      engine::MakeSlotEngineConfig(job, *slot, *plan, store);
  engine::EngineOptions options = input.options;
  if (input.set_engine) options.on_connected = input.set_engine;
  ZSHARD_ASSIGN_OR_RETURN(
      held->engine, engine::StepEngine::CreateFromState(
                        config, options, std::move(buffers), epoch.resume_step,
                        epoch.resume_adam_step));
  return held;
}

}  // namespace zshard::worker
