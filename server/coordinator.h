// The coordinator process's core, minus flag parsing: the store and its
// election, the gRPC server (plus health and reflection) with the leader's
// parts (Leadership: membership, rendezvous, services, ticker) or the
// standby's answer, and the HTTP port (dashboard and metrics).
#pragma once

#include <memory>
#include <optional>
#include <set>
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
#include "server/store/leader_election.h"
#include "server/telemetry/telemetry_store.h"

namespace grpc {
class Channel;
class Server;
class Service;
class CallbackGenericService;
}  // namespace grpc

namespace zshard::server {

class StateStore;
class EtcdStateStore;
class LeaderElection;
class Leadership;
class RpcMetrics;
class TelemetryStore;
class MetricsServer;
class StandbyService;
struct LeaderAddresses;
class WorkerServiceImpl;
class RendezvousServiceImpl;
class DashboardServiceImpl;
class AdminServiceImpl;
struct ElectionView;
namespace web {
class WebRoutes;
}

struct CoordinatorOptions {
  // gRPC address; port 0 picks a free port (see Coordinator::port()).
  std::string listen = "127.0.0.1:0";
  // HOST:PORT clients reach this coordinator at: its campaign key's value,
  // the leader a standby names. Empty: listen's host with the bound port
  // (the machine's hostname for a wildcard host, 0.0.0.0 or [::]).
  std::string advertise;
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
  // host:port of the HTTP port: the dashboard (server/web/), the
  // Prometheus endpoint, /healthz and /leader; port 0 picks a free port
  // (http_port()). Empty: none.
  std::string http_listen;
  // HOST:PORT the HTTP port is reached at, published with the campaign
  // key, so that a standby's answer and page link to the leader's
  // dashboard. Empty: http_listen's host with the bound port (the
  // machine's hostname for a wildcard host), as advertise is made.
  std::string http_advertise;
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
//
// With an etcd store several coordinators campaign on one prefix
// (LeaderElection). The one that leads loads the state and serves every
// service; the others are standbys on their own address: they answer every
// RPC with UNAVAILABLE naming the leader (StandbyService) and report the
// services NOT_SERVING on gRPC health, until their election says they
// lead: then they load the state from the store and serve, on the same
// address, without a restart. A leader that loses its lease (its writes
// are fenced from then on) goes back to standby the same way.
class Coordinator {
 public:
  // Opens the store (taking its directory's lock), binds the address and,
  // leading, loads or creates the job and serves it (with etcd it may
  // start as a standby). FailedPrecondition when the job's checkpoint dir
  // cannot be created or written, when another coordinator holds the state
  // dir (naming its pid) or when the store cannot be reached (etcd down:
  // nothing is served without the store); InvalidArgument for bad options;
  // Unavailable when the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<Coordinator>> Start(
      job::JobSpec spec, CoordinatorOptions options);
  ~Coordinator();

  // The bound gRPC port and "host:port" with it.
  int port() const { return port_; }
  std::string address() const;
  // The address the election names this coordinator by (--advertise).
  const std::string& advertise() const { return advertise_; }
  // The bound HTTP port (0 when none) and the address it is advertised at
  // ("" when none).
  int http_port() const { return http_port_; }
  const std::string& http_advertise() const { return http_advertise_; }

  // Stops serving and, with etcd, resigns (a standby leads at once).
  // Idempotent.
  void Shutdown();

  // Serves the job (always with SQLite or memory); false while a standby.
  bool leading();
  // Not OK once the coordinator cannot go on: it came to lead but could not
  // load the state or bind its address again. The process should exit
  // (its lease then ends and another coordinator leads).
  absl::Status failure();

  // An in-process channel to the gRPC server serving now (the leader's
  // services or the standby's answer), shared until the server is rebuilt;
  // null while none serves. The dashboard's HTTP routes call through it.
  std::shared_ptr<grpc::Channel> LocalChannel();

  // The leader's parts; null while a standby.
  Membership* membership();
  TelemetryStore* telemetry();

 private:
  Coordinator() = default;
  // Builds and starts the gRPC server: the leader's services, or the
  // standby's generic handler (leadership_ null).
  absl::Status BuildServerLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(role_mu_);
  // Loads the job's state and becomes its leader: a Leadership replaces the
  // standby's or the model intake's service; with `rebuild` the server is
  // built again to serve it (Start builds its first one after). On error
  // nothing changed.
  absl::Status ServeLeadershipLocked(bool rebuild)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(role_mu_);
  void StopServerLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(role_mu_);
  // Standby to leader, and back.
  absl::Status TakeOverLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(role_mu_);
  absl::Status StepDownLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(role_mu_);
  // Records "standby" events for candidates that came or went.
  void NoteStandbysLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(role_mu_);
  // A leader that has heard from no member for a whole lease while
  // standbys exist gives its place up (campaigning again behind them), so
  // that a standby that reaches the workers may lead.
  void YieldIfCutOffLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(role_mu_);
  // A job without a model (coordinator_intake.cc): takes the model stored
  // with the job, if an earlier leader took one.
  absl::Status AdoptStoredModelLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(role_mu_);
  // Leading a job that still has no model: serves ModelIntakeService.
  absl::Status StartIntakeLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(role_mu_);
  // ProvideModel while intake_: the first valid model is taken and
  // FinishIntake runs on intake_thread_; a later one must match it.
  absl::Status TakeModel(const std::string& worker,
                         const std::string& model_json);
  // Builds the Leadership with the taken model and serves it.
  void FinishIntake();
  // Follows the election: takes over or steps down.
  void RoleLoop();
  void StepRole();
  ElectionView View();
  std::string CurrentLeader();
  LeaderAddresses Leader();
  // Binds the HTTP port (options_.http_listen) and sets http_advertise_.
  absl::Status StartHttpLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(role_mu_);
  std::string RenderMetrics();

  job::JobSpec spec_;
  CoordinatorOptions options_;
  std::string store_prefix_;
  // etcd: the campaign whose key fences store_'s writes.
  std::unique_ptr<LeaderElection> election_;
  std::unique_ptr<StateStore> store_;
  EtcdStateStore* etcd_store_ = nullptr;  // store_ when it is etcd
  // store_ behind one lock (null without a store).
  std::unique_ptr<StateStore> locked_store_;
  std::unique_ptr<RpcMetrics> rpc_metrics_;
  std::unique_ptr<web::WebRoutes> web_routes_;
  std::unique_ptr<MetricsServer> metrics_server_;
  std::thread role_thread_;
  // The bound address, for binding again (listen's host, port_).
  std::string bound_listen_;
  std::string advertise_;
  std::string http_advertise_;
  int port_ = 0;
  // What View() reads on gRPC threads, set once each is ready: the
  // address once bound, the election once campaigning. Until then an etcd
  // standby names no leader (never itself).
  absl::Mutex view_mu_;
  std::string view_advertise_ ABSL_GUARDED_BY(view_mu_);
  std::string view_http_advertise_ ABSL_GUARDED_BY(view_mu_);
  LeaderElection* view_election_ ABSL_GUARDED_BY(view_mu_) = nullptr;
  int http_port_ = 0;

  absl::Mutex role_mu_;
  std::unique_ptr<Leadership> leadership_ ABSL_GUARDED_BY(role_mu_);
  std::unique_ptr<StandbyService> standby_service_ ABSL_GUARDED_BY(role_mu_);
  // Leading a job that has no model yet (see TakeModel).
  bool intake_ ABSL_GUARDED_BY(role_mu_) = false;
  std::unique_ptr<grpc::Service> intake_service_ ABSL_GUARDED_BY(role_mu_);
  std::unique_ptr<grpc::CallbackGenericService> awaiting_service_
      ABSL_GUARDED_BY(role_mu_);
  // The model taken (the first ProvideModel's) and who gave it.
  absl::Mutex intake_mu_;
  std::optional<plan::ModelSpec> taken_model_ ABSL_GUARDED_BY(intake_mu_);
  std::string taken_from_ ABSL_GUARDED_BY(intake_mu_);
  // The job as it was when the intake began (spec_ less its model).
  job::JobSpec intake_spec_ ABSL_GUARDED_BY(intake_mu_);
  std::thread intake_thread_ ABSL_GUARDED_BY(intake_mu_);
  std::unique_ptr<grpc::Server> server_ ABSL_GUARDED_BY(role_mu_);
  std::shared_ptr<grpc::Channel> local_channel_ ABSL_GUARDED_BY(role_mu_);
  absl::Status failure_ ABSL_GUARDED_BY(role_mu_);
  // The leader a standby saw last (for the takeover's event).
  std::string last_leader_ ABSL_GUARDED_BY(role_mu_);
  std::set<std::string> standbys_ ABSL_GUARDED_BY(role_mu_);
  // The fence of the leadership being served.
  LeaderElection::Fence fence_ ABSL_GUARDED_BY(role_mu_);
  // When this coordinator last came to lead.
  absl::Time led_since_ ABSL_GUARDED_BY(role_mu_);

  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace zshard::server
