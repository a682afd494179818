// What a leading coordinator serves, built when it comes to lead (at start,
// or when a standby takes over) and torn down when it stops: the membership
// loaded from the store, the rendezvous store, telemetry, the four gRPC
// services and the lease ticker. The process around it (gRPC server,
// election, metrics endpoint) is the Coordinator's.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/job/job_spec.h"
#include "server/coordinator.h"
#include "server/service/dashboard_service.h"

namespace grpc {
class ServerBuilder;
}

namespace zshard::server {

// Thread-safe. Stop (or the destructor) ends it; the gRPC server its
// services are registered on must be shut down first.
class Leadership {
 public:
  // Loads (or creates) the job from `store` (null: memory only) and starts
  // the ticker. `metrics` and `store` must outlive it; `election` fills
  // GetClusterStatus's leader and standbys.
  static absl::StatusOr<std::unique_ptr<Leadership>> Start(
      const job::JobSpec& spec, const CoordinatorOptions& options,
      StateStore* store, RpcMetrics* metrics,
      std::function<ElectionView()> election);
  ~Leadership();

  // Registers the four services (they live as long as this) on the
  // server being built; once per Leadership.
  void Register(grpc::ServerBuilder* builder);
  // The server Register built has started: serve heartbeats.
  void StartServing();
  // That server was shut down (before it is destroyed): stop serving
  // heartbeats. Idempotent.
  void StopServing();
  // Wakes waiters, stops the ticker. Idempotent.
  void Stop();

  // The coordinator's Prometheus text without zshard_leader.
  std::string RenderMetrics();

  Membership* membership() { return membership_.get(); }
  TelemetryStore* telemetry() { return telemetry_.get(); }

 private:
  Leadership() = default;
  void TickLoop();

  int64_t tick_interval_ms_ = 50;
  std::unique_ptr<Membership> membership_;
  std::unique_ptr<RendezvousKv> kv_;
  RpcMetrics* rpc_metrics_ = nullptr;
  std::unique_ptr<TelemetryStore> telemetry_;
  std::unique_ptr<WorkerServiceImpl> worker_service_;
  std::unique_ptr<RendezvousServiceImpl> rendezvous_service_;
  std::unique_ptr<DashboardServiceImpl> dashboard_service_;
  std::unique_ptr<AdminServiceImpl> admin_service_;
  std::thread ticker_;

  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace zshard::server
