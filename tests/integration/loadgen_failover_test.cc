// zshard-loadgen's engine (RunLoad) across a coordinator failover, against
// in-test coordinators on 127.0.0.1: the simulated workers join the first
// of the list; it is shut down mid-run; the next is a standby naming a new
// leader; each connection follows it there, and every worker heartbeats
// and watches its plan there with the id and token it got at its join.

#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "tests/common/net/fake_standby.h"
#include "tests/testing/wait_for.h"
#include "tools/loadgen/load_generator.h"
#include "zshard/v1/worker_service.grpc.pb.h"

namespace zshard::loadgen {
namespace {

using ::zshard::testing::WaitFor;

// A leading coordinator for idle simulated workers: joins get ids
// PREFIX-N, heartbeats are answered ACTIVE, plan watches stay open until
// cancelled. Records the ids it sees per call.
class FakeLeader final : public v1::WorkerService::Service {
 public:
  explicit FakeLeader(std::string prefix) : prefix_(std::move(prefix)) {}

  grpc::Status Join(grpc::ServerContext*, const v1::JoinRequest*,
                    v1::JoinResponse* response) override {
    absl::MutexLock lock(&mu_);
    ++joins_;
    response->set_worker_id(absl::StrCat(prefix_, "-", joins_));
    response->set_token(absl::StrCat(prefix_, "-token-", joins_));
    return grpc::Status::OK;
  }

  grpc::Status Heartbeat(grpc::ServerContext*,
                         const v1::HeartbeatRequest* request,
                         v1::HeartbeatResponse* response) override {
    absl::MutexLock lock(&mu_);
    ++heartbeats_;
    heartbeat_ids_.insert(request->worker_id() + "/" + request->token());
    response->set_state(v1::MEMBER_STATE_ACTIVE);
    return grpc::Status::OK;
  }

  grpc::Status WatchPlan(grpc::ServerContext* context,
                         const v1::WatchPlanRequest* request,
                         grpc::ServerWriter<v1::PlanUpdate>*) override {
    absl::MutexLock lock(&mu_);
    watch_ids_.insert(request->worker_id() + "/" + request->token());
    auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return shutdown_ || context->IsCancelled();
    };
    while (!done()) {
      mu_.AwaitWithTimeout(absl::Condition(&done), absl::Milliseconds(5));
    }
    return grpc::Status::OK;
  }

  grpc::Status Leave(grpc::ServerContext*, const v1::LeaveRequest*,
                     v1::LeaveResponse*) override {
    absl::MutexLock lock(&mu_);
    ++leaves_;
    return grpc::Status::OK;
  }

  void Shutdown() {
    absl::MutexLock lock(&mu_);
    shutdown_ = true;
  }
  int joins() {
    absl::MutexLock lock(&mu_);
    return joins_;
  }
  int heartbeats() {
    absl::MutexLock lock(&mu_);
    return heartbeats_;
  }
  int leaves() {
    absl::MutexLock lock(&mu_);
    return leaves_;
  }
  std::set<std::string> heartbeat_ids() {
    absl::MutexLock lock(&mu_);
    return heartbeat_ids_;
  }
  std::set<std::string> watch_ids() {
    absl::MutexLock lock(&mu_);
    return watch_ids_;
  }

 private:
  const std::string prefix_;
  absl::Mutex mu_;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  int joins_ ABSL_GUARDED_BY(mu_) = 0;
  int heartbeats_ ABSL_GUARDED_BY(mu_) = 0;
  int leaves_ ABSL_GUARDED_BY(mu_) = 0;
  std::set<std::string> heartbeat_ids_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> watch_ids_ ABSL_GUARDED_BY(mu_);
};

std::unique_ptr<grpc::Server> Serve(FakeLeader* service, std::string* address) {
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                           &port);
  builder.RegisterService(service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  *address = absl::StrCat("127.0.0.1:", port);
  return server;
}

TEST(LoadgenFailoverTest, SimulatedWorkersFollowTheNewLeader) {
  FakeLeader old_leader("old");
  FakeLeader new_leader("new");
  std::string old_address;
  std::string new_address;
  std::unique_ptr<grpc::Server> old_server = Serve(&old_leader, &old_address);
  std::unique_ptr<grpc::Server> new_server = Serve(&new_leader, &new_address);
  ASSERT_NE(old_server, nullptr);
  ASSERT_NE(new_server, nullptr);
  auto standby = ::zshard::testing::FakeStandby::Start(new_address);
  ASSERT_TRUE(standby.ok()) << standby.status();

  constexpr int kWorkers = 16;
  std::vector<std::shared_ptr<net::LeaderFollower>> connections;
  for (int c = 0; c < 2; ++c) {
    net::ChannelOptions channel;
    channel.target = absl::StrCat(old_address, ",", (*standby)->address());
    auto follower = net::LeaderFollower::Create(channel);
    ASSERT_TRUE(follower.ok()) << follower.status();
    connections.push_back(*std::move(follower));
  }
  LoadOptions options;
  options.workers = kWorkers;
  options.heartbeat_ms = 50;
  options.duration_ms = 3000;
  absl::StatusOr<LoadReport> report = absl::UnknownError("running");
  std::thread run([&] { report = RunLoad(options, connections); });

  // Every worker joined the old leader and beats there; then it dies.
  ASSERT_TRUE(WaitFor([&] { return old_leader.heartbeats() >= 2 * kWorkers; },
                      10000, 2));
  old_leader.Shutdown();
  old_server->Shutdown(std::chrono::system_clock::now());
  run.join();
  ASSERT_TRUE(report.ok()) << report.status();

  EXPECT_EQ(report->workers_joined, kWorkers);
  EXPECT_EQ(report->fenced, 0);
  EXPECT_EQ(old_leader.joins(), kWorkers);
  EXPECT_EQ(new_leader.joins(), 0);
  // The same credentials, on the heartbeats and the plan watches.
  std::set<std::string> credentials;
  for (int i = 1; i <= kWorkers; ++i) {
    credentials.insert(absl::StrCat("old-", i, "/old-token-", i));
  }
  EXPECT_EQ(new_leader.heartbeat_ids(), credentials);
  EXPECT_EQ(new_leader.watch_ids(), credentials);
  EXPECT_EQ(new_leader.leaves(), kWorkers);
  EXPECT_GT(report->heartbeats_ok, 0);
  new_leader.Shutdown();
  new_server->Shutdown(std::chrono::system_clock::now());
}

}  // namespace
}  // namespace zshard::loadgen
