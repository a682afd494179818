// TransitionHandler: the worker's side of the two-phase transition.

#include "client/worker/session/transition_handler.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace zshard::worker {
namespace {

const v1::Assignment* FindAssignment(const v1::PlanUpdate& update,
                                     const std::string& worker_id) {
  for (const v1::Assignment& a : update.assignments()) {
    if (a.worker_id() == worker_id) return &a;
  }
  return nullptr;
}

}  // namespace

TransitionHandler::TransitionHandler(std::string worker_id,
                                     SteppingWorkload* workload)
    : worker_id_(std::move(worker_id)), workload_(workload) {}

int64_t TransitionHandler::epoch() const {
  absl::MutexLock lock(&mu_);
  return committed_epoch_;
}

int TransitionHandler::rank() const {
  absl::MutexLock lock(&mu_);
  return rank_;
}

std::optional<TransitionAck> TransitionHandler::Apply(
    const v1::PlanUpdate& update) {
  absl::MutexLock lock(&mu_);
  const int64_t epoch = update.epoch();
  const v1::Assignment* mine = FindAssignment(update, worker_id_);
  switch (update.phase()) {
    case v1::PLAN_PHASE_PROPOSED: {
      if (epoch <= committed_epoch_) return std::nullopt;
      // Members and non-members alike stop: nobody steps into an epoch that
      // is not committed, and a worker left out of it must not go on alone.
      const int64_t step = workload_->Pause();
      if (mine == nullptr) return std::nullopt;
      if (pending_epoch_ != epoch) {
        ZSHARD_LOG_INFO("prepared for epoch", {{"epoch", absl::StrCat(epoch)},
                                               {"step", absl::StrCat(step)}});
      }
      pending_epoch_ = epoch;
      // An idle step is atomic: the state is always at the finished step.
      return TransitionAck{epoch, v1::ACK_PHASE_PREPARED, step, true};
    }
    case v1::PLAN_PHASE_COMMITTED: {
      if (epoch < committed_epoch_) return std::nullopt;
      const int rank = mine != nullptr ? mine->rank() : -1;
      if (epoch == committed_epoch_) {
        // A replay (reconnect, coordinator restart): keep our own step, but
        // resume if a later proposal stopped us and was lost.
        pending_epoch_ = 0;
        if (rank_ >= 0 && !workload_->active()) {
          workload_->Activate(workload_->step());
        }
      } else {
        committed_epoch_ = epoch;
        rank_ = rank;
        pending_epoch_ = 0;
        workload_->OnEpochCommitted(
            EpochInfo{epoch, rank, update.world(), update.instances(),
                      update.plan_hash(), update.resume_step()});
        if (rank >= 0) {
          workload_->Activate(update.resume_step());
        } else {
          workload_->Pause();
        }
        ZSHARD_LOG_INFO("epoch committed",
                        {{"epoch", absl::StrCat(epoch)},
                         {"rank", absl::StrCat(rank)},
                         {"world", absl::StrCat(update.world())},
                         {"resume_step", absl::StrCat(update.resume_step())}});
      }
      if (mine == nullptr) return std::nullopt;
      return TransitionAck{epoch, v1::ACK_PHASE_ACTIVE, workload_->step(),
                           false};
    }
    case v1::PLAN_PHASE_ABANDONED: {
      if (epoch <= committed_epoch_) return std::nullopt;
      pending_epoch_ = 0;
      if (rank_ >= 0) workload_->Activate(workload_->step());
      ZSHARD_LOG_INFO("epoch abandoned", {{"epoch", absl::StrCat(epoch)},
                                          {"reason", update.reason()}});
      return std::nullopt;
    }
    default:
      return std::nullopt;
  }
}

}  // namespace zshard::worker
