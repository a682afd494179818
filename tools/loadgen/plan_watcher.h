// One simulated worker's plan watch: a callback-API reader of the
// WatchPlan stream that acknowledges every transition it is part of at
// once (PREPARED at step 0, then ACTIVE), as an idle worker would.
#pragma once

#include <atomic>
#include <string>

#include "absl/synchronization/notification.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/client_callback.h"
#include "zshard/v1/worker_service.grpc.pb.h"

namespace zshard::loadgen {

// Counters shared by every watcher of a run. Thread-safe.
struct WatchCounters {
  std::atomic<int64_t> updates{0};
  std::atomic<int64_t> acks{0};
  std::atomic<int64_t> ack_failures{0};
};

// Lives until OnDone; the owner calls Cancel() and then WaitDone(). Runs on
// gRPC's callback threads.
class PlanWatcher final : public grpc::ClientReadReactor<v1::PlanUpdate> {
 public:
  // `stub` and `counters` must outlive the watcher.
  PlanWatcher(v1::WorkerService::Stub* stub, std::string worker_id,
              std::string token, WatchCounters* counters);

  // Starts the stream.
  void Start();
  // Ends the stream (OnDone follows).
  void Cancel() { context_.TryCancel(); }
  // Blocks until the stream is done.
  void WaitDone() { done_.WaitForNotification(); }

  void OnReadDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

 private:
  void Ack(int64_t epoch, v1::AckPhase phase, int64_t step);

  v1::WorkerService::Stub* const stub_;
  const std::string worker_id_;
  const std::string token_;
  WatchCounters* const counters_;
  grpc::ClientContext context_;
  v1::WatchPlanRequest request_;
  v1::PlanUpdate update_;
  absl::Notification done_;
};

}  // namespace zshard::loadgen
