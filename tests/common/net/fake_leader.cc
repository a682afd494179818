// FakeLeader: the calls an idle client makes, answered and counted.
#include "tests/common/net/fake_leader.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"

namespace zshard::testing {

FakeLeader::FakeLeader(std::string prefix, FakeLeaderOptions options)
    : prefix_(std::move(prefix)), options_(std::move(options)) {}

grpc::Status FakeLeader::Join(grpc::ServerContext*, const v1::JoinRequest*,
                              v1::JoinResponse* response) {
  absl::MutexLock lock(&mu_);
  ++joins_;
  response->set_worker_id(absl::StrCat(prefix_, "-", joins_));
  response->set_token(absl::StrCat(prefix_, "-token-", joins_));
  response->set_job_name("fake");
  response->set_job_spec_json(options_.job_spec_json);
  response->set_heartbeat_interval_ms(options_.heartbeat_interval_ms);
  response->set_lease_timeout_ms(options_.lease_timeout_ms);
  return grpc::Status::OK;
}

grpc::Status FakeLeader::Heartbeat(grpc::ServerContext*,
                                   const v1::HeartbeatRequest* request,
                                   v1::HeartbeatResponse* response) {
  absl::MutexLock lock(&mu_);
  ++heartbeats_;
  heartbeat_ids_.insert(request->worker_id() + "/" + request->token());
  response->set_epoch(1);
  response->set_state(v1::MEMBER_STATE_ACTIVE);
  return grpc::Status::OK;
}

grpc::Status FakeLeader::WatchPlan(grpc::ServerContext* context,
                                   const v1::WatchPlanRequest* request,
                                   grpc::ServerWriter<v1::PlanUpdate>* writer) {
  {
    absl::MutexLock lock(&mu_);
    ++watches_;
    watch_ids_.insert(request->worker_id() + "/" + request->token());
  }
  if (options_.commit_on_watch) {
    v1::PlanUpdate update;
    update.set_epoch(1);
    update.set_phase(v1::PLAN_PHASE_COMMITTED);
    update.set_world(1);
    update.set_instances(1);
    v1::Assignment* a = update.add_assignments();
    a->set_worker_id(request->worker_id());
    a->set_rank(0);
    writer->Write(update);
  }
  absl::MutexLock lock(&mu_);
  auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return shutdown_ || context->IsCancelled();
  };
  while (!done()) {
    mu_.AwaitWithTimeout(absl::Condition(&done), absl::Milliseconds(5));
  }
  return grpc::Status::OK;
}

grpc::Status FakeLeader::AckTransition(grpc::ServerContext*,
                                       const v1::AckTransitionRequest*,
                                       v1::AckTransitionResponse*) {
  return grpc::Status::OK;
}

grpc::Status FakeLeader::Leave(grpc::ServerContext*, const v1::LeaveRequest*,
                               v1::LeaveResponse*) {
  absl::MutexLock lock(&mu_);
  ++leaves_;
  return grpc::Status::OK;
}

void FakeLeader::Shutdown() {
  absl::MutexLock lock(&mu_);
  shutdown_ = true;
}

int FakeLeader::joins() {
  absl::MutexLock lock(&mu_);
  return joins_;
}

int FakeLeader::heartbeats() {
  absl::MutexLock lock(&mu_);
  return heartbeats_;
}

int FakeLeader::watches() {
  absl::MutexLock lock(&mu_);
  return watches_;
}

int FakeLeader::leaves() {
  absl::MutexLock lock(&mu_);
  return leaves_;
}

std::set<std::string> FakeLeader::heartbeat_ids() {
  absl::MutexLock lock(&mu_);
  return heartbeat_ids_;
}

std::set<std::string> FakeLeader::watch_ids() {
  absl::MutexLock lock(&mu_);
  return watch_ids_;
}

std::unique_ptr<grpc::Server> ServeOnLoopback(grpc::Service* service,
                                              std::string* address) {
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                           &port);
  builder.RegisterService(service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) return nullptr;
  *address = absl::StrCat("127.0.0.1:", port);
  return server;
}

absl::StatusOr<std::unique_ptr<FailoverScene>> FailoverScene::Start(
    const FakeLeaderOptions& options) {
  std::unique_ptr<FailoverScene> s(new FailoverScene(options));
  s->old_server_ = ServeOnLoopback(&s->old_, &s->old_address_);
  s->new_server_ = ServeOnLoopback(&s->new_, &s->new_address_);
  if (s->old_server_ == nullptr || s->new_server_ == nullptr) {
    return absl::UnavailableError("cannot listen on 127.0.0.1");
  }
  // The standby names the new leader, as the surviving coordinators do
  // once one of them leads.
  auto standby = FakeStandby::Start(s->new_address_);
  if (!standby.ok()) return standby.status();
  s->standby_ = *std::move(standby);
  return s;
}

FailoverScene::~FailoverScene() {
  standby_.reset();
  KillOld();
  new_.Shutdown();
  if (new_server_ != nullptr) {
    new_server_->Shutdown(std::chrono::system_clock::now());
  }
}

std::string FailoverScene::list() const {
  return absl::StrCat(old_address_, ",", standby_->address());
}

void FailoverScene::KillOld() {
  old_.Shutdown();
  if (old_server_ != nullptr) {
    old_server_->Shutdown(std::chrono::system_clock::now());
    old_server_.reset();
  }
}

}  // namespace zshard::testing
