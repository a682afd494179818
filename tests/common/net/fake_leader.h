// A leading coordinator as far as idle clients need, for the failover tests
// of the worker session and the load generator: the n-th join gets
// PREFIX-n and PREFIX-token-n (with the job spec and timings of
// FakeLeaderOptions), heartbeats are answered ACTIVE in epoch 1, a plan
// watch commits epoch 1 with the watcher at rank 0 (when asked) and stays
// open until cancelled or Shutdown. Records the calls and the credentials
// (ID/TOKEN) each kind of call carried.
#pragma once

#include <memory>
#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/server.h"
#include "tests/common/net/fake_standby.h"
#include "zshard/v1/worker_service.grpc.pb.h"

namespace zshard::testing {

struct FakeLeaderOptions {
  // The joiners' job (JoinResponse.job_spec_json). Default: idle, endless.
  std::string job_spec_json =
      R"({"workload":{"kind":"idle","step_delay_ms":2,"steps":0}})";
  int64_t heartbeat_interval_ms = 20;
  int64_t lease_timeout_ms = 1000;
  // A plan watch first gets a COMMITTED update of epoch 1, world 1, with
  // the watcher at rank 0. Default true.
  bool commit_on_watch = true;
};

class FakeLeader final : public v1::WorkerService::Service {
 public:
  explicit FakeLeader(std::string prefix, FakeLeaderOptions options = {});

  grpc::Status Join(grpc::ServerContext*, const v1::JoinRequest*,
                    v1::JoinResponse* response) override;
  grpc::Status Heartbeat(grpc::ServerContext*,
                         const v1::HeartbeatRequest* request,
                         v1::HeartbeatResponse* response) override;
  grpc::Status WatchPlan(grpc::ServerContext* context,
                         const v1::WatchPlanRequest* request,
                         grpc::ServerWriter<v1::PlanUpdate>* writer) override;
  grpc::Status AckTransition(grpc::ServerContext*,
                             const v1::AckTransitionRequest*,
                             v1::AckTransitionResponse*) override;
  grpc::Status Leave(grpc::ServerContext*, const v1::LeaveRequest*,
                     v1::LeaveResponse*) override;

  // Ends the open plan watches.
  void Shutdown();
  int joins();
  int heartbeats();
  int watches();
  int leaves();
  std::set<std::string> heartbeat_ids();
  std::set<std::string> watch_ids();

 private:
  const std::string prefix_;
  const FakeLeaderOptions options_;
  absl::Mutex mu_;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  int joins_ ABSL_GUARDED_BY(mu_) = 0;
  int heartbeats_ ABSL_GUARDED_BY(mu_) = 0;
  int watches_ ABSL_GUARDED_BY(mu_) = 0;
  int leaves_ ABSL_GUARDED_BY(mu_) = 0;
  std::set<std::string> heartbeat_ids_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> watch_ids_ ABSL_GUARDED_BY(mu_);
};

// `service` served on 127.0.0.1:0 (plaintext); its address in `address`.
// Null when it cannot listen.
std::unique_ptr<grpc::Server> ServeOnLoopback(grpc::Service* service,
                                              std::string* address);

// A client's failover on loopback: an old leader and a new one (ids
// old-N and new-N), each served, and a standby that names the new one. A
// client given list() ("OLD,STANDBY") joins the old leader; after KillOld
// the standby sends it to the new one. Both leaders are shut down with the
// scene.
class FailoverScene {
 public:
  static absl::StatusOr<std::unique_ptr<FailoverScene>> Start(
      const FakeLeaderOptions& options = {});
  ~FailoverScene();

  FakeLeader& old_leader() { return old_; }
  FakeLeader& new_leader() { return new_; }
  FakeStandby& standby() { return *standby_; }
  // "OLD,STANDBY": the addresses a client starts with.
  std::string list() const;
  // The old leader dies: its open calls end and its port closes.
  void KillOld();

 private:
  explicit FailoverScene(const FakeLeaderOptions& options)
      : old_("old", options), new_("new", options) {}

  FakeLeader old_;
  FakeLeader new_;
  std::string old_address_;
  std::string new_address_;
  std::unique_ptr<grpc::Server> old_server_;
  std::unique_ptr<grpc::Server> new_server_;
  std::unique_ptr<FakeStandby> standby_;
};

}  // namespace zshard::testing
