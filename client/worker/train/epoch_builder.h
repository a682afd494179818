// EpochBuilder: prepares one committed epoch for this worker (docs/design.md
// section 6, protocol point 4): finishes a pending step when told, builds
// the buffers of its new rank, moves optimizer state with the StateMover
// (from its base-epoch state, from peers or from a checkpoint), and builds
// the new step engine from that state. It does not step; the base epoch's
// state is left as it was (read only).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "client/worker/comm/kv_store.h"
#include "client/worker/engine/step_engine.h"
#include "client/worker/engine/workload.h"
#include "client/worker/reshard/state_mover.h"
#include "client/worker/runner/runner.h"
#include "common/job/job_slot.h"
#include "common/job/job_spec.h"

namespace zshard::worker {

// One epoch's engine on this worker and what it depends on. `engine` is
// null for a member that holds no rank in the epoch (it only sent state).
struct HeldEngine {
  EpochInfo epoch;
  std::unique_ptr<comm::KvStore> store;
  // `store` as the epoch's rendezvous sees it: waits end promptly when the
  // preparation is cancelled.
  std::unique_ptr<comm::KvStore> abortable_store;
  std::unique_ptr<engine::Workload> workload;
  std::unique_ptr<engine::StepEngine> engine;
  // The engine's communicators were aborted or a collective failed: its
  // state is intact but it can step no more.
  bool broken = false;
};

// A rendezvous store scoped to `epoch`.
using StoreFactory =
    std::function<std::unique_ptr<comm::KvStore>(int64_t epoch)>;

// True for errors after which the worker keeps its state and waits for the
// next proposal (a peer failed, a collective timed out or was aborted);
// false for errors that end the worker (a plan hash mismatch, a bad
// config, a broken invariant).
bool IsRecoverable(const absl::Status& status);

// What to tell the coordinator when preparing `epoch` failed with
// `status`: in a restore epoch every range comes from the checkpoint, so
// DataLoss (a damaged, missing or unreadable rank file: see StateMover)
// names the checkpoint as the failed source; otherwise a move that failed
// from a live source names that member (reshard::FailedSourceMember).
RunnerFailure PreparationFailure(const EpochInfo& epoch,
                                 const absl::Status& status);

// Sets `failure`'s peer fields from the peer `status` names: the engine's
// epoch rank (comm::kEpochPeerPayload), or the member at the other end of a
// failed state move (reshard::kFailedLinkPayload) when it has a rank in
// `epoch`.
void NameFailedPeer(const EpochInfo& epoch, const absl::Status& status,
                    RunnerFailure* failure);

// The plan of `world` for `job`, checked against the coordinator's hash
// (FailedPrecondition "plan hash mismatch ..." otherwise). In a
// model-parallel job, `slot` (job::SlotJobOf) picks the slot whose plan is
// made, and the hash checked is the whole parallel plan's.
absl::StatusOr<plan::Plan> CheckedPlan(const job::JobSpec& job, int world,
                                       int64_t epoch,
                                       const std::string& plan_hash,
                                       const job::SlotJob* slot = nullptr);

struct BuildInput {
  const job::JobSpec* job = nullptr;
  engine::EngineOptions options;
  EpochInfo epoch;
  // This worker's state in the base epoch (null: none). Its engine may
  // finish a pending step (the only change made to it); its buffers are
  // read by the moves.
  HeldEngine* base = nullptr;
  // The base engine's pending commit (PreparedState.commit_pending).
  bool base_commit_pending = false;
  StoreFactory new_store;
  // Called with the mover before it runs and with null after, so that an
  // abort from another thread reaches it.
  std::function<void(reshard::StateMover*)> set_mover;
  // Called with the engine being created from moved state while its
  // parameters are all-gathered, then with nullptr (see
  // EngineOptions::on_connected); Abort() on it ends that all-gather.
  // Optional.
  std::function<void(engine::StepEngine*)> set_engine;
  // Makes the epoch's workload (rank `rank` of `world`, a model-parallel
  // job's slot job and data-parallel rank and size; `fresh` for the
  // job's first epoch, whose params come from the workload). Default
  // (null): engine::MakeWorkload.
  std::function<absl::StatusOr<std::unique_ptr<engine::Workload>>(
      const job::JobSpec& job, int world, int rank, bool fresh)>
      make_workload;
  // Called with this rank's slot job and the epoch's rendezvous store
  // before make_workload (a trainer job's model-parallel rendezvous); an
  // error fails the preparation. Optional.
  std::function<absl::Status(const job::SlotJob& slot, comm::KvStore& store)>
      before_workload;
  // Raised to cancel the preparation: rendezvous waits then end promptly
  // (Aborted). Must outlive the HeldEngine returned. Required.
  const std::atomic<bool>* cancelled = nullptr;
};

// True when this worker (epoch.worker_id) is the sender of one of the
// epoch's moves.
bool SendsState(const EpochInfo& epoch);

// Logs `memory` per category as line `what` for `step`.
void LogEngineMemory(const char* what, int64_t step,
                     const engine::MemoryBytes& memory);

// Prepares `input.epoch`. Errors: see IsRecoverable.
absl::StatusOr<std::unique_ptr<HeldEngine>> BuildEpoch(BuildInput input);

}  // namespace zshard::worker
