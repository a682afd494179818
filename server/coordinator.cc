// Coordinator assembly: store, election, gRPC server (leader or standby),
// metrics; the role changes of a standby and a deposed leader.
#include "server/coordinator.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/file_io.h"
#include "common/logging.h"
#include "common/status.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "grpcpp/support/channel_arguments.h"
#include "server/host_port.h"
#include "server/leadership.h"
#include "server/metrics/metrics_server.h"
#include "server/metrics/rpc_metrics.h"
#include "server/service/checkpoint_convert.h"
#include "server/service/dashboard_service.h"
#include "server/service/model_intake_service.h"
#include "server/standby_service.h"
#include "server/state/state_store.h"
#include "server/store/etcd_state_store.h"
#include "server/store/leader_election.h"
#include "server/store/locked_state_store.h"
#include "server/store/store_spec.h"
#include "server/web/web_routes.h"
#include "zshard/v1/admin_service.grpc.pb.h"
#include "zshard/v1/dashboard_service.grpc.pb.h"
#include "zshard/v1/rendezvous_service.grpc.pb.h"
#include "zshard/v1/worker_service.grpc.pb.h"

namespace zshard::server {
namespace {

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

// The services a standby does not serve (gRPC health names).
const char* const kServiceNames[] = {v1::WorkerService::service_full_name(),
                                     v1::RendezvousService::service_full_name(),
                                     v1::AdminService::service_full_name(),
                                     v1::DashboardService::service_full_name()};

// The role loop's period (the election polls every 100 ms).
constexpr absl::Duration kRolePoll = absl::Milliseconds(100);

// What a model-parallel job can run today: the synthetic and trainer
// workloads, with per-slot checkpoints, and a restore of the same tensor
// and pipeline sizes. One line naming what is not run.
absl::Status CheckParallelRunnable(const job::JobSpec& spec,
                                   const CoordinatorOptions& options) {
  if (options.membership.restore.has_value()) {
    const CheckpointRecord& c = *options.membership.restore;
    ZSHARD_RETURN_IF_ERROR(plan::CheckRestoreSizes(
        {c.tensor, c.pipeline, c.context}, spec.parallel));
  }
  if (!spec.parallel.model_parallel()) return absl::OkStatus();
  const std::string what =
      absl::StrCat("job '", spec.name, "' is model-parallel (tensor ",
                   spec.parallel.tensor, ", pipeline ", spec.parallel.pipeline,
                   ", context ", spec.parallel.context, "): ");
  if (spec.workload.kind != job::WorkloadKind::kSynthetic &&
      spec.workload.kind != job::WorkloadKind::kTrainer) {
    return absl::InvalidArgumentError(absl::StrCat(
        what,
        "the coordinator runs model-parallel jobs with the synthetic or "
        "trainer workload only (workload '",
        job::WorkloadKindName(spec.workload.kind), "')"));
  }
  return absl::OkStatus();
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
  if (absl::Status runnable = CheckParallelRunnable(spec, options);
      !runnable.ok()) {
    return runnable;
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
  ZSHARD_ASSIGN_OR_RETURN(const HostPort listen, ParseHostPort(options.listen));
  std::unique_ptr<Coordinator> c(new Coordinator());
  c->spec_ = std::move(spec);
  c->options_ = std::move(options);
  if (c->options_.clock == nullptr &&
      c->options_.membership.pause_grace_gap_ms == 0) {
    // On the real clock, a tick that came this late could not hear the
    // heartbeats in between: every member gets one lease of grace rather
    // than a false death. (A fake clock's jumps are the test's.)
    c->options_.membership.pause_grace_gap_ms =
        std::max<int64_t>({1000, 20 * c->options_.tick_interval_ms,
                           c->spec_.heartbeat_interval_ms});
  }
  if (c->options_.clock == nullptr) c->options_.clock = RealClock::Get();
  if (!c->options_.membership.write_manifest) {
    c->options_.membership.write_manifest = WriteManifestFile;
  }
  c->rpc_metrics_ = std::make_unique<RpcMetrics>();
  std::string store = c->options_.store;
  if (store.empty() && !c->options_.state_dir.empty()) {
    store = "sqlite:" + c->options_.state_dir;
  }
  StoreSpec store_spec;
  StoreOpenOptions open_options;
  if (!store.empty()) {
    ZSHARD_ASSIGN_OR_RETURN(store_spec, ParseStoreSpec(store));
    open_options.etcd_tls = c->options_.etcd_tls;
    open_options.lease_ttl_s = c->options_.etcd_lease_ttl_s;
    open_options.campaign = false;  // below, once the address is bound
    auto opened = OpenStateStore(store_spec, open_options);
    if (!opened.ok() && store_spec.kind == StoreSpec::Kind::kEtcd &&
        opened.status().code() == absl::StatusCode::kUnavailable) {
      // Not serving without the store is a start-up refusal, as a held
      // state dir is.
      return absl::FailedPreconditionError(
          absl::StrCat("cannot open the store: ", opened.status().message()));
    }
    if (!opened.ok()) return opened.status();
    c->store_ = std::move(opened->store);
    c->etcd_store_ = opened->etcd;
    c->store_prefix_ = store_spec.prefix;
    c->locked_store_ = std::make_unique<LockedStateStore>(c->store_.get());
  }
  absl::MutexLock lock(&c->role_mu_);
  c->bound_listen_ = c->options_.listen;
  if (c->etcd_store_ == nullptr) {
    // The only coordinator of its store: it leads from the start.
    ZSHARD_RETURN_IF_ERROR(c->AdoptStoredModelLocked());
    if (job::HasModel(c->spec_)) {
      ZSHARD_RETURN_IF_ERROR(c->ServeLeadershipLocked(/*rebuild=*/false));
    } else {
      c->intake_ = true;
    }
  }
  ZSHARD_RETURN_IF_ERROR(c->BuildServerLocked());
  if (c->intake_) ZSHARD_RETURN_IF_ERROR(c->StartIntakeLocked());
  c->bound_listen_ = JoinHostPort(listen.host, c->port_);
  c->advertise_ = c->options_.advertise;
  if (c->advertise_.empty()) {
    c->advertise_ = AdvertisedAddress(listen.host, c->port_);
  }
  {
    absl::MutexLock view_lock(&c->view_mu_);
    c->view_advertise_ = c->advertise_;
  }
  // Before the campaign: its key publishes the HTTP address.
  ZSHARD_RETURN_IF_ERROR(c->StartHttpLocked());
  if (c->etcd_store_ != nullptr) {
    open_options.candidate_id = c->advertise_;
    LeaderElectionOptions election_options =
        ElectionOptionsFor(store_spec, open_options);
    election_options.http = c->http_advertise_;
    auto election = LeaderElection::Campaign(std::move(election_options));
    if (!election.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot open the store: ", election.status().message()));
    }
    c->election_ = *std::move(election);
    {
      absl::MutexLock view_lock(&c->view_mu_);
      c->view_election_ = c->election_.get();
    }
    if (c->election_->leading()) {
      ZSHARD_RETURN_IF_ERROR(c->TakeOverLocked());
    } else {
      ZSHARD_LOG_INFO(absl::StrCat(
          "standby: ", c->advertise_, " stands by on etcd prefix '",
          c->store_prefix_, "'; ", StandbyMessage(c->Leader())));
    }
    c->role_thread_ = std::thread([raw = c.get()] { raw->RoleLoop(); });
  }
  return c;
}

absl::Status Coordinator::BuildServerLocked() {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(bound_listen_, Credentials(options_), &port);
  builder.SetMaxReceiveMessageSize(4 << 20);
  // No SO_REUSEPORT: a second process binding the same port (another
  // coordinator, anything) fails rather than sharing its connections.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // Clients ping every second when they hear nothing
  // (net::MakeCoordinatorChannel), so that a connection a network fault broke
  // is dropped and made again instead of waiting out TCP's retransmission
  // back-off: allow it.
  builder.AddChannelArgument(
      GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 500);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  if (leadership_ != nullptr) {
    leadership_->Register(&builder);
  } else if (intake_) {
    // A generic service is registered on one server only: new ones.
    intake_service_ = std::make_unique<ModelIntakeService>(
        spec_.name, [this](const std::string& worker, const std::string& m) {
          return TakeModel(worker, m);
        });
    awaiting_service_ = std::make_unique<AwaitingModelService>(spec_.name);
    builder.RegisterService(intake_service_.get());
    builder.RegisterCallbackGenericService(awaiting_service_.get());
  } else {
    // A generic service is registered on one server only: a new one each
    // time (the previous server is gone).
    standby_service_ =
        std::make_unique<StandbyService>([this] { return Leader(); });
    builder.RegisterCallbackGenericService(standby_service_.get());
  }
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port == 0) {
    server_.reset();
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", bound_listen_));
  }
  port_ = port;
  if (leadership_ != nullptr) leadership_->StartServing();
  grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
  if (health != nullptr) {
    health->SetServingStatus("", true);
    for (const char* name : kServiceNames) {
      health->SetServingStatus(name, leadership_ != nullptr || intake_);
    }
  }
  return absl::OkStatus();
}

void Coordinator::StopServerLocked() {
  if (server_ != nullptr) {
    server_->Shutdown(std::chrono::system_clock::now() +
                      std::chrono::seconds(1));
  }
  local_channel_.reset();  // calls in flight keep theirs
  // After the server's shutdown, before it is gone (a server that failed
  // to build leaves the lane to end too).
  if (leadership_ != nullptr) leadership_->StopServing();
  server_.reset();
}

absl::Status Coordinator::ServeLeadershipLocked(bool rebuild) {
  ZSHARD_ASSIGN_OR_RETURN(
      std::unique_ptr<Leadership> leadership,
      Leadership::Start(spec_, options_, locked_store_.get(),
                        rpc_metrics_.get(), [this] { return View(); }));
  if (rebuild) StopServerLocked();  // the standby's or the model intake's
  leadership_ = std::move(leadership);
  intake_ = false;
  return rebuild ? BuildServerLocked() : absl::OkStatus();
}

absl::Status Coordinator::TakeOverLocked() {
  std::optional<LeaderElection::Fence> fence = election_->LeadingFence();
  if (!fence.has_value()) return absl::OkStatus();  // lost it again
  const absl::Time start = absl::Now();
  etcd_store_->SetFence(fence->key, fence->create_revision);
  fence_ = *fence;
  ZSHARD_RETURN_IF_ERROR(AdoptStoredModelLocked());
  if (!job::HasModel(spec_)) {
    StopServerLocked();  // the standby's
    intake_ = true;
    ZSHARD_RETURN_IF_ERROR(BuildServerLocked());
    return StartIntakeLocked();
  }
  if (absl::Status s = ServeLeadershipLocked(/*rebuild=*/true); !s.ok()) {
    return absl::Status(
        s.code(), absl::StrCat("came to lead etcd prefix '", store_prefix_,
                               "' but cannot load the state: ", s.message()));
  }
  Membership* m = leadership_->membership();
  const std::string previous =
      last_leader_.empty() || last_leader_ == advertise_ ? std::string()
                                                         : last_leader_;
  m->CoordinatorEvent(
      "leader",
      absl::StrCat(
          advertise_, " leads etcd prefix '", store_prefix_, "'",
          previous.empty() ? std::string() : absl::StrCat(" after ", previous),
          " (loaded and serving in ",
          absl::ToInt64Milliseconds(absl::Now() - start), " ms)"));
  if (!previous.empty()) {
    m->CoordinatorEvent("deposed",
                        absl::StrCat(previous,
                                     " no longer leads: its campaign key "
                                     "is gone (its lease expired or was "
                                     "revoked); its writes are fenced"));
  }
  ZSHARD_LOG_INFO(absl::StrCat("leader: ", advertise_, " leads etcd prefix '",
                               store_prefix_, "'"));
  standbys_.clear();
  NoteStandbysLocked();
  led_since_ = absl::Now();
  return absl::OkStatus();
}

void Coordinator::YieldIfCutOffLocked() {
  if (standbys_.empty()) return;
  const int64_t lease = spec_.lease_timeout_ms;
  // Members need a lease or so to find a new leader before it judges them.
  if (absl::Now() - led_since_ < absl::Milliseconds(2 * lease)) return;
  Membership* m = leadership_->membership();
  const int64_t quiet = m->HeardFromNoneMs();
  if (quiet <= lease) return;
  const std::string why = absl::StrCat(
      "it heard from no member for ", quiet, " ms (lease ", lease,
      " ms) while ", standbys_.size(),
      " standby coordinator(s) may reach them: it gave up leading and "
      "campaigns again behind them");
  m->CoordinatorEvent("resigned", absl::StrCat(advertise_, ": ", why));
  ZSHARD_LOG_WARN(absl::StrCat("resigned: ", advertise_, ": ", why));
  absl::Status s = election_->Yield(why);
  if (!s.ok()) {
    ZSHARD_LOG_WARN(absl::StrCat("resigning failed: ", s.message()));
  }
}

absl::Status Coordinator::StepDownLocked() {
  const std::string why = election_->LossReason();
  ZSHARD_LOG_ERROR(
      absl::StrCat("deposed: ", advertise_, " no longer leads etcd prefix '",
                   store_prefix_, "' (", why.empty() ? "its lease ended" : why,
                   "); its writes are fenced; serving as a standby"));
  if (leadership_ != nullptr) leadership_->Stop();
  StopServerLocked();
  leadership_.reset();
  intake_ = false;
  standbys_.clear();
  return BuildServerLocked();
}

void Coordinator::NoteStandbysLocked() {
  std::set<std::string> now;
  for (const LeaderElection::Candidate& c : election_->Candidates()) {
    if (!c.self) now.insert(c.id);
  }
  Membership* m = leadership_->membership();
  for (const std::string& id : now) {
    if (standbys_.count(id) == 0) {
      m->CoordinatorEvent("standby", absl::StrCat(id,
                                                  " stands by (the "
                                                  "leader is ",
                                                  advertise_, ")"));
    }
  }
  for (const std::string& id : standbys_) {
    if (now.count(id) == 0) {
      m->CoordinatorEvent(
          "standby",
          absl::StrCat(id, " no longer stands by (its campaign key is gone)"));
    }
  }
  standbys_ = std::move(now);
}

void Coordinator::RoleLoop() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), kRolePoll);
    if (stopping_) break;
    mu_.Unlock();
    StepRole();
    mu_.Lock();
  }
}

void Coordinator::StepRole() {
  const std::optional<LeaderElection::Fence> fence = election_->LeadingFence();
  const bool lead = fence.has_value();
  absl::MutexLock lock(&role_mu_);
  if (!failure_.ok()) return;
  absl::Status s;
  if (lead && leadership_ != nullptr &&
      (fence->key != fence_.key ||
       fence->create_revision != fence_.create_revision)) {
    // It lost its key and won again with a new one between two polls: its
    // writes are fenced by the old key, so it starts over.
    s = StepDownLocked();
    if (s.ok()) s = TakeOverLocked();
  } else if (lead && leadership_ == nullptr && !intake_) {
    s = TakeOverLocked();
  } else if (!lead && (leadership_ != nullptr || intake_)) {
    s = StepDownLocked();
  } else if (lead && leadership_ != nullptr) {
    NoteStandbysLocked();
    YieldIfCutOffLocked();
  } else {
    std::string leader = CurrentLeader();
    if (!leader.empty()) last_leader_ = leader;
  }
  if (!s.ok()) {
    ZSHARD_LOG_ERROR(std::string(s.message()));
    failure_ = s;
  }
}

std::string Coordinator::CurrentLeader() { return View().leader; }

LeaderAddresses Coordinator::Leader() {
  ElectionView view = View();
  return {std::move(view.leader), std::move(view.leader_http)};
}

ElectionView Coordinator::View() {
  ElectionView view;
  LeaderElection* election = nullptr;
  {
    absl::MutexLock lock(&view_mu_);
    election = view_election_;
    if (etcd_store_ == nullptr) {
      view.leader = view_advertise_;
      view.leader_http = view_http_advertise_;
    }
  }
  // Without etcd it is the only coordinator; with etcd, the server answers
  // (as a standby) before the campaign starts: no leader is known yet.
  if (election == nullptr) return view;
  std::vector<LeaderElection::Candidate> c = election->Candidates();
  for (size_t i = 0; i < c.size(); ++i) {
    if (i == 0) {
      view.leader = c[i].id;
      view.leader_http = c[i].http;
    } else {
      view.standbys.push_back(c[i].id);
    }
  }
  return view;
}

bool Coordinator::leading() {
  absl::MutexLock lock(&role_mu_);
  return leadership_ != nullptr;
}

absl::Status Coordinator::failure() {
  absl::MutexLock lock(&role_mu_);
  return failure_;
}

std::shared_ptr<grpc::Channel> Coordinator::LocalChannel() {
  absl::MutexLock lock(&role_mu_);
  if (server_ == nullptr) return nullptr;
  if (local_channel_ == nullptr) {
    local_channel_ = server_->InProcessChannel(grpc::ChannelArguments());
  }
  return local_channel_;
}

Membership* Coordinator::membership() {
  absl::MutexLock lock(&role_mu_);
  return leadership_ == nullptr ? nullptr : leadership_->membership();
}

TelemetryStore* Coordinator::telemetry() {
  absl::MutexLock lock(&role_mu_);
  return leadership_ == nullptr ? nullptr : leadership_->telemetry();
}

std::string Coordinator::address() const {
  absl::StatusOr<HostPort> listen = ParseHostPort(options_.listen);
  return JoinHostPort(listen.ok() ? listen->host : "127.0.0.1", port_);
}

void Coordinator::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  if (role_thread_.joinable()) role_thread_.join();
  {
    absl::MutexLock lock(&intake_mu_);
    if (intake_thread_.joinable()) intake_thread_.join();
  }
  {
    // Start may have failed half way: any part may be missing.
    absl::MutexLock lock(&role_mu_);
    if (leadership_ != nullptr) leadership_->Stop();
    StopServerLocked();
  }
  if (metrics_server_ != nullptr) metrics_server_->Stop();
  // A standby leads at once rather than after the lease's TTL.
  if (election_ != nullptr) election_->Resign().IgnoreError();
}

Coordinator::~Coordinator() {
  Shutdown();
  absl::MutexLock lock(&role_mu_);
  leadership_.reset();
}

}  // namespace zshard::server
