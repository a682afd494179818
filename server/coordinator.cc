// Coordinator assembly: store, membership, gRPC server, ticker, metrics.
#include "server/coordinator.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/file_io.h"
#include "common/status.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "server/metrics/metrics_server.h"
#include "server/metrics/reshard_metrics.h"
#include "server/metrics/rpc_metrics.h"
#include "server/metrics/telemetry_metrics.h"
#include "server/service/admin_service.h"
#include "server/service/checkpoint_convert.h"
#include "server/service/dashboard_service.h"
#include "server/service/rendezvous_service.h"
#include "server/service/worker_service.h"
#include "server/store/leader_election.h"
#include "server/store/state_store.h"
#include "server/store/store_spec.h"

namespace zshard::server {
namespace {

// Splits "host:port" at the last colon.
absl::Status SplitHostPort(const std::string& address, std::string* host,
                           int* port) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(address.substr(colon + 1), port) || *port < 0 ||
      *port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("address '", address, "' is not HOST:PORT"));
  }
  *host = address.substr(0, colon);
  if (host->size() > 2 && host->front() == '[' && host->back() == ']') {
    *host = host->substr(1, host->size() - 2);
  }
  return absl::OkStatus();
}

std::shared_ptr<grpc::ServerCredentials> Credentials(
    const CoordinatorOptions& o) {
  if (o.tls_cert_pem.empty()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions ssl(
      o.tls_client_ca_pem.empty()
          ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
          : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  ssl.pem_root_certs = o.tls_client_ca_pem;
  ssl.pem_key_cert_pairs.push_back({o.tls_key_pem, o.tls_cert_pem});
  return grpc::SslServerCredentials(ssl);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Coordinator>> Coordinator::Start(
    job::JobSpec spec, CoordinatorOptions options) {
  if (options.tls_cert_pem.empty() != options.tls_key_pem.empty()) {
    return absl::InvalidArgumentError(
        "tls cert and tls key must be given together");
  }
  if (!options.tls_client_ca_pem.empty() && options.tls_cert_pem.empty()) {
    return absl::InvalidArgumentError("tls client ca needs tls cert and key");
  }
  if (!spec.checkpoint.dir.empty()) {
    // Refused here, where an operator sees it, rather than as a warning in
    // every worker's log at each checkpoint interval.
    absl::Status usable = EnsureWritableDir(spec.checkpoint.dir);
    if (!usable.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("job's checkpoint dir is unusable: ", usable.message()));
    }
  }
  std::unique_ptr<Coordinator> c(new Coordinator());
  c->options_ = std::move(options);
  if (c->options_.clock == nullptr &&
      c->options_.membership.pause_grace_gap_ms == 0) {
    // On the real clock, a tick that came this late could not hear the
    // heartbeats in between: every member gets one lease of grace rather
    // than a false death. (A fake clock's jumps are the test's.)
    c->options_.membership.pause_grace_gap_ms = std::max<int64_t>(
        {1000, 20 * c->options_.tick_interval_ms, spec.heartbeat_interval_ms});
  }
  if (c->options_.clock == nullptr) c->options_.clock = RealClock::Get();
  if (!c->options_.membership.write_manifest) {
    c->options_.membership.write_manifest = WriteManifestFile;
  }
  std::string store = c->options_.store;
  if (store.empty() && !c->options_.state_dir.empty()) {
    store = "sqlite:" + c->options_.state_dir;
  }
  if (!store.empty()) {
    ZSHARD_ASSIGN_OR_RETURN(StoreSpec spec, ParseStoreSpec(store));
    StoreOpenOptions open_options;
    open_options.candidate_id =
        absl::StrCat(c->options_.listen, " pid ", getpid());
    open_options.etcd_tls = c->options_.etcd_tls;
    open_options.lease_ttl_s = c->options_.etcd_lease_ttl_s;
    auto opened = OpenStateStore(spec, open_options);
    if (!opened.ok() && spec.kind == StoreSpec::Kind::kEtcd &&
        opened.status().code() == absl::StatusCode::kUnavailable) {
      // Not serving without the store is a start-up refusal, as a held
      // state dir is.
      return absl::FailedPreconditionError(
          absl::StrCat("cannot open the store: ", opened.status().message()));
    }
    if (!opened.ok()) return opened.status();
    c->election_ = std::move(opened->election);
    c->store_ = std::move(opened->store);
  }
  ZSHARD_ASSIGN_OR_RETURN(
      c->membership_,
      Membership::Create(spec, c->options_.clock, c->store_.get(),
                         c->options_.membership));
  c->kv_ = std::make_unique<RendezvousKv>(c->options_.rendezvous);
  c->rpc_metrics_ = std::make_unique<RpcMetrics>();
  c->telemetry_ = std::make_unique<TelemetryStore>(c->options_.telemetry);
  ZSHARD_RETURN_IF_ERROR(c->StartServing(spec));
  return c;
}

absl::Status Coordinator::StartServing(const job::JobSpec&) {
  Membership* m = membership_.get();
  RpcMetrics* metrics = rpc_metrics_.get();
  worker_service_ = std::make_unique<WorkerServiceImpl>(
      m, metrics, telemetry_.get(), options_.clock);
  rendezvous_service_ =
      std::make_unique<RendezvousServiceImpl>(m, kv_.get(), metrics);
  dashboard_service_ =
      std::make_unique<DashboardServiceImpl>(m, telemetry_.get(), metrics);
  admin_service_ =
      std::make_unique<AdminServiceImpl>(m, options_.admin_token, metrics);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options_.listen, Credentials(options_), &port_);
  builder.SetMaxReceiveMessageSize(4 << 20);
  builder.RegisterService(worker_service_.get());
  builder.RegisterService(rendezvous_service_.get());
  builder.RegisterService(dashboard_service_.get());
  builder.RegisterService(admin_service_.get());
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", options_.listen));
  }
  ticker_ = std::thread([this] { TickLoop(); });
  if (!options_.metrics_listen.empty()) {
    std::string host;
    int port = 0;
    ZSHARD_RETURN_IF_ERROR(
        SplitHostPort(options_.metrics_listen, &host, &port));
    metrics_server_ = std::make_unique<MetricsServer>();
    ZSHARD_ASSIGN_OR_RETURN(
        metrics_port_,
        metrics_server_->Start(host, port, [this] { return RenderMetrics(); }));
  }
  return absl::OkStatus();
}

bool Coordinator::deposed() {
  return election_ != nullptr && !election_->leading();
}

std::string Coordinator::address() const {
  std::string host;
  int ignored = 0;
  if (!SplitHostPort(options_.listen, &host, &ignored).ok()) host = "127.0.0.1";
  if (host.find(':') != std::string::npos) host = "[" + host + "]";
  return absl::StrCat(host, ":", port_);
}

void Coordinator::TickLoop() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    mu_.AwaitWithTimeout(absl::Condition(&stopping_),
                         absl::Milliseconds(options_.tick_interval_ms));
    if (stopping_) break;
    mu_.Unlock();
    membership_->Tick();
    mu_.Lock();
  }
}

std::string Coordinator::RenderMetrics() {
  MembershipStats s = membership_->Stats();
  std::string out =
      "# HELP zshard_members Members by state.\n"
      "# TYPE zshard_members gauge\n";
  for (MemberState state :
       {MemberState::kJoining, MemberState::kActive, MemberState::kSpare,
        MemberState::kDraining, MemberState::kDead, MemberState::kLeft}) {
    auto it = s.members_by_state.find(state);
    absl::StrAppend(&out, "zshard_members{state=\"", MemberStateName(state),
                    "\"} ", it == s.members_by_state.end() ? 0 : it->second,
                    "\n");
  }
  absl::StrAppend(
      &out, "# HELP zshard_epoch The committed epoch.\n",
      "# TYPE zshard_epoch gauge\n", "zshard_epoch ", s.epoch, "\n",
      "# HELP zshard_transitions_total Epoch transitions by outcome.\n",
      "# TYPE zshard_transitions_total counter\n",
      "zshard_transitions_total{outcome=\"proposed\"} ", s.proposals, "\n",
      "zshard_transitions_total{outcome=\"committed\"} ", s.commits, "\n",
      "zshard_transitions_total{outcome=\"abandoned\"} ", s.abandons, "\n",
      // Abandoned because a later change altered their world (a part of
      // "abandoned").
      "zshard_transitions_total{outcome=\"superseded\"} ", s.superseded, "\n",
      "# HELP zshard_rendezvous_bytes Bytes held by the rendezvous store.\n",
      "# TYPE zshard_rendezvous_bytes gauge\n", "zshard_rendezvous_bytes ",
      kv_->TotalBytes(), "\n");
  absl::StrAppend(&out, RenderReshardMetrics(s, WallTimeMs()));
  absl::StrAppend(&out, rpc_metrics_->Render());
  absl::StrAppend(&out,
                  RenderTelemetryMetrics(membership_->View(), telemetry_.get()),
                  dashboard_service_->RenderLedgerMetrics());
  return out;
}

void Coordinator::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  // Start may have failed half way: any part may be missing.
  if (membership_ != nullptr) membership_->Shutdown();
  if (kv_ != nullptr) kv_->Shutdown();
  if (server_ != nullptr) {
    server_->Shutdown(std::chrono::system_clock::now() +
                      std::chrono::seconds(1));
  }
  if (ticker_.joinable()) ticker_.join();
  if (metrics_server_ != nullptr) metrics_server_->Stop();
}

Coordinator::~Coordinator() { Shutdown(); }

}  // namespace zshard::server
