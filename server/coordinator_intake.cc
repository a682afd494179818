// A job started without a model takes its first trainer's: the
// coordinator's intake (see service/model_intake_service.h).
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/plan/model_match.h"
#include "common/status.h"
#include "server/coordinator.h"
#include "server/leadership.h"
#include "server/service/model_intake_service.h"
#include "server/state/state_store.h"

namespace zshard::server {

absl::Status Coordinator::AdoptStoredModelLocked() {
  if (job::HasModel(spec_) || locked_store_ == nullptr) {
    return absl::OkStatus();
  }
  ZSHARD_ASSIGN_OR_RETURN(StoredState state, locked_store_->Load());
  if (state.job_spec_json.empty() || state.job_name != spec_.name) {
    return absl::OkStatus();  // a fresh store (another job is refused later)
  }
  absl::StatusOr<job::JobSpec> stored = job::ParseJobSpec(state.job_spec_json);
  if (!stored.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the stored job spec does not parse: ", stored.status().message()));
  }
  if (job::HasModel(*stored)) {
    spec_.model = stored->model;
    ZSHARD_LOG_INFO(absl::StrCat("job '", spec_.name,
                                 "': the model taken from its first trainer "
                                 "is in the store (",
                                 spec_.model.params.size(), " params)"));
  }
  return absl::OkStatus();
}

absl::Status Coordinator::StartIntakeLocked() {
  absl::MutexLock lock(&intake_mu_);
  intake_spec_ = spec_;
  taken_model_.reset();
  ZSHARD_LOG_INFO(absl::StrCat(AwaitingModelMessage(spec_.name),
                               " (zshard-worker --trainer-socket sends it)"));
  return absl::OkStatus();
}

absl::Status Coordinator::TakeModel(const std::string& worker,
                                    const std::string& model_json) {
  absl::MutexLock lock(&intake_mu_);
  ZSHARD_ASSIGN_OR_RETURN(plan::ModelSpec model,
                          CheckGivenModel(intake_spec_, model_json));
  if (taken_model_.has_value()) {
    absl::Status same = plan::MatchModel(*taken_model_, model);
    if (!same.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(
          same.message(), " (taken from worker ", taken_from_, "'s trainer)"));
    }
    return absl::OkStatus();
  }
  taken_model_ = std::move(model);
  taken_from_ = worker;
  // Not here: building the leadership replaces this server, which waits
  // for this call to end.
  intake_thread_ = std::thread([this] { FinishIntake(); });
  return absl::OkStatus();
}

void Coordinator::FinishIntake() {
  plan::ModelSpec model;
  std::string from;
  {
    absl::MutexLock lock(&intake_mu_);
    model = *taken_model_;
    from = taken_from_;
  }
  absl::MutexLock lock(&role_mu_);
  if (!intake_) return;  // stepped down meanwhile: the next leader asks again
  {
    absl::MutexLock view(&mu_);
    if (stopping_) return;
  }
  spec_.model = model;
  absl::Status s;
  if (etcd_store_ != nullptr) {
    s = TakeOverLocked();
  } else {
    s = ServeLeadershipLocked(/*rebuild=*/true);
  }
  if (s.ok() && leadership_ != nullptr) {
    leadership_->membership()->CoordinatorEvent(
        "model",
        absl::StrCat("the job's model is worker ", from,
                     "'s trainer's: ", model.params.size(), " params, ",
                     model.numel(), " elements (stored with the job)"));
    return;
  }
  if (s.ok()) return;  // lost the lead on the way
  ZSHARD_LOG_ERROR(absl::StrCat(
      "cannot serve the job with its trainer's model: ", s.message()));
  failure_ = s;
}

}  // namespace zshard::server
