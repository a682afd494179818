// The coordinator process's core, minus flag parsing: the membership, its
// store, the rendezvous store, the gRPC server with every service (plus
// health and reflection), the lease ticker and the metrics endpoint.
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "common/job/job_spec.h"
#include "server/membership/membership.h"
#include "server/rendezvous/rendezvous_kv.h"
#include "server/store/http_request.h"
#include "server/telemetry/telemetry_store.h"

namespace grpc {
class Server;
}

namespace zshard::server {

class StateStore;
class LeaderElection;
class RpcMetrics;
class TelemetryStore;
class MetricsServer;
class WorkerServiceImpl;
class RendezvousServiceImpl;
class DashboardServiceImpl;
class AdminServiceImpl;

struct CoordinatorOptions {
  // gRPC address; port 0 picks a free port (see Coordinator::port()).
  std::string listen = "127.0.0.1:0";
  // The state store, as --store takes it (sqlite:DIR or
  // etcd:HOST:PORT[,...]/PREFIX; see store/store_spec.h). Empty: state_dir.
  std::string store;
  // Directory of coordinator.db (sqlite:DIR); with store empty too, state
  // is kept in memory only.
  std::string state_dir;
  // TLS to etcd (file paths; all empty: plain HTTP).
  HttpTlsOptions etcd_tls;
  // The etcd election lease (see StoreOpenOptions::lease_ttl_s).
  int64_t etcd_lease_ttl_s = 5;
  // host:port of the Prometheus endpoint; empty: none.
  std::string metrics_listen;
  // PEM contents. cert and key together turn TLS on; client_ca then
  // requires and verifies client certificates.
  std::string tls_cert_pem;
  std::string tls_key_pem;
  std::string tls_client_ca_pem;
  // Bearer token for AdminService; empty: admin RPCs are open.
  std::string admin_token;
  // How often leases and suspects are checked.
  int64_t tick_interval_ms = 50;
  // Time source for leases; null: the real clock.
  Clock* clock = nullptr;
  MembershipOptions membership;
  TelemetryOptions telemetry;
  RendezvousOptions rendezvous;
};

// Thread-safe. Serving starts in Start and ends in Shutdown (or the
// destructor); Shutdown does not wait for open WatchPlan streams longer
// than a second.
class Coordinator {
 public:
  // Opens the store (taking its directory's lock), loads or creates the
  // job and starts serving. FailedPrecondition when the job's checkpoint
  // dir cannot be created or written, when another coordinator holds the
  // state dir (naming its pid) or when the store cannot be reached (etcd
  // down: nothing is served without the store); InvalidArgument for bad
  // options; Unavailable when the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<Coordinator>> Start(
      job::JobSpec spec, CoordinatorOptions options);
  ~Coordinator();

  // The bound gRPC port and "host:port" with it.
  int port() const { return port_; }
  std::string address() const;
  // The bound metrics port (0 when none).
  int metrics_port() const { return metrics_port_; }

  // Stops serving. Idempotent.
  void Shutdown();

  // With an etcd store: this coordinator no longer leads its prefix (its
  // lease expired or was revoked); its store writes fail from then on and
  // it should exit. Always false with SQLite.
  bool deposed();

  Membership* membership() { return membership_.get(); }
  TelemetryStore* telemetry() { return telemetry_.get(); }

 private:
  Coordinator() = default;
  absl::Status StartServing(const job::JobSpec& spec);
  std::string RenderMetrics();
  void TickLoop();

  CoordinatorOptions options_;
  // etcd: the campaign that fences store_'s writes (outlives store_).
  std::unique_ptr<LeaderElection> election_;
  std::unique_ptr<StateStore> store_;
  std::unique_ptr<Membership> membership_;
  std::unique_ptr<RendezvousKv> kv_;
  std::unique_ptr<RpcMetrics> rpc_metrics_;
  std::unique_ptr<TelemetryStore> telemetry_;
  std::unique_ptr<WorkerServiceImpl> worker_service_;
  std::unique_ptr<RendezvousServiceImpl> rendezvous_service_;
  std::unique_ptr<DashboardServiceImpl> dashboard_service_;
  std::unique_ptr<AdminServiceImpl> admin_service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<MetricsServer> metrics_server_;
  std::thread ticker_;
  int port_ = 0;
  int metrics_port_ = 0;

  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace zshard::server
