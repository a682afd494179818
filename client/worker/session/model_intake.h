// A job started without a model takes its first trainer's (the coordinator
// answers Join with FAILED_PRECONDITION and the zshard-awaiting-model
// trailer until it has one). ModelIntake opens this worker's trainer
// socket before the join, waits for its trainer's hello and hands over the
// model it carries; the hub then stays with the trainer attached and
// becomes the TrainRunner's (TrainRunner::Options::trainer_hub).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "client/worker/trainer/trainer_hub.h"

namespace zshard::worker {

// Thread-safe.
class ModelIntake {
 public:
  // `socket`: the --trainer-socket path; empty: this worker has no trainer
  // and can only wait for another worker's.
  explicit ModelIntake(std::string socket) : socket_(std::move(socket)) {}

  // The model object (JSON text) of the trainer attached to this worker's
  // socket, waiting at most `wait_ms` for one (the hub starts on the first
  // call). The session calls it in short slices, so that a Stop() before
  // the join is seen between them. DeadlineExceeded when none attached in time;
  // FailedPrecondition without a socket; the hub's error when the socket cannot
  // be opened.
  absl::StatusOr<std::string> WaitForModel(const std::string& job_name,
                                           int64_t wait_ms);

  // The hub, once WaitForModel started it; null before. Its trainer (if
  // attached) stays attached.
  std::shared_ptr<trainer::TrainerHub> hub() const;

 private:
  const std::string socket_;
  mutable absl::Mutex mu_;
  std::shared_ptr<trainer::TrainerHub> hub_ ABSL_GUARDED_BY(mu_);
};

}  // namespace zshard::worker
