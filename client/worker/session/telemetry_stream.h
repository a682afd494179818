// TelemetryStream: the worker's side of WorkerService.StreamTelemetry, one
// TelemetryReport per training step. Streaming is best effort: a failure is
// logged (once per outage) and the stream is reopened at the next report;
// it never stops training. With several coordinators the stream follows
// the leader (common/net/leader_follower.h).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "client/worker/engine/step_telemetry.h"
#include "common/net/leader_follower.h"
#include "grpcpp/client_context.h"
#include "zshard/v1/worker_service.grpc.pb.h"

namespace zshard::worker {

// The report for `t` in `epoch` (credentials left empty): phase times in
// ms, bytes, memory per category ("param", "grad", "master", "exp_avg",
// "exp_avg_sq", "comm"), loss, grad norm, skipped.
v1::TelemetryReport MakeTelemetryReport(int64_t epoch,
                                        const engine::StepTelemetry& t);

// Thread-safe; Send blocks at most for one stream write.
class TelemetryStream {
 public:
  struct Credentials {
    std::string worker_id;
    std::string token;
  };

  // `credentials` is called at each Send (the token changes on rejoin).
  TelemetryStream(std::shared_ptr<net::LeaderFollower> coordinators,
                  std::function<Credentials()> credentials);
  // Closes the stream.
  ~TelemetryStream();
  TelemetryStream(const TelemetryStream&) = delete;
  TelemetryStream& operator=(const TelemetryStream&) = delete;

  // Sends one report; opens the stream first when none is open, or anew
  // on the current address when the follower has moved since.
  void Send(int64_t epoch, const engine::StepTelemetry& t);
  // Half-closes the stream and waits for the coordinator's answer.
  void Close();

 private:
  void CloseLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::shared_ptr<net::LeaderFollower> coordinators_;
  const std::function<Credentials()> credentials_;
  absl::Mutex mu_;
  // Where the open stream goes.
  net::LeaderFollower::Pick pick_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<v1::WorkerService::Stub> stub_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<grpc::ClientContext> context_ ABSL_GUARDED_BY(mu_);
  v1::StreamTelemetryResponse response_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<grpc::ClientWriter<v1::TelemetryReport>> writer_
      ABSL_GUARDED_BY(mu_);
  bool warned_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace zshard::worker
