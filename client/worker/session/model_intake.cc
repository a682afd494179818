#include "client/worker/session/model_intake.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status.h"

namespace zshard::worker {

absl::StatusOr<std::string> ModelIntake::WaitForModel(
    const std::string& job_name, int64_t wait_ms) {
  if (socket_.empty()) {
    return absl::FailedPreconditionError(
        "this worker has no --trainer-socket to take the model from");
  }
  std::shared_ptr<trainer::TrainerHub> hub;
  {
    absl::MutexLock lock(&mu_);
    if (hub_ == nullptr) {
      trainer::TrainerHubOptions o;
      o.socket_path = socket_;
      o.job_name = job_name;  // the model stays open: any valid one
      ZSHARD_ASSIGN_OR_RETURN(hub_, trainer::TrainerHub::Start(o));
      ZSHARD_LOG_INFO(
          absl::StrCat("job '", job_name,
                       "' takes its model from its first trainer: waiting for "
                       "a trainer on ",
                       socket_));
    }
    hub = hub_;
  }
  ZSHARD_RETURN_IF_ERROR(hub->WaitForTrainer(wait_ms));
  std::optional<std::string> model = hub->AttachedModel();
  if (!model.has_value()) {
    return absl::DeadlineExceededError(
        "the trainer left before its model "
        "was sent");
  }
  return *model;
}

std::shared_ptr<trainer::TrainerHub> ModelIntake::hub() const {
  absl::MutexLock lock(&mu_);
  return hub_;
}

}  // namespace zshard::worker
