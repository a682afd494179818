// A worker session across a coordinator failover, on 127.0.0.1: it joins
// the first coordinator of its list; that one is shut down; the next in
// the list is a standby naming a new leader (not in the list); the session
// follows it there and goes on with the id and token it had, without a
// new join, reopening its plan watch on the new leader.

#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/worker/session/coordinator_session.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "tests/common/net/fake_standby.h"
#include "tests/testing/wait_for.h"
#include "zshard/v1/worker_service.grpc.pb.h"

namespace zshard::worker {
namespace {

using ::zshard::testing::WaitFor;

// A leading coordinator as far as one idle worker needs: a join gives
// `id_prefix`-1 and its token, heartbeats are answered ACTIVE, and the
// plan watch commits epoch 1 with the caller at rank 0. Records the
// credentials it sees.
class FakeLeader final : public v1::WorkerService::Service {
 public:
  explicit FakeLeader(std::string id_prefix)
      : id_prefix_(std::move(id_prefix)) {}

  grpc::Status Join(grpc::ServerContext*, const v1::JoinRequest*,
                    v1::JoinResponse* response) override {
    absl::MutexLock lock(&mu_);
    ++joins_;
    response->set_worker_id(id_prefix_ + "-1");
    response->set_token(id_prefix_ + "-token");
    response->set_job_name("fake");
    response->set_job_spec_json(
        R"({"workload":{"kind":"idle","step_delay_ms":2,"steps":0}})");
    response->set_heartbeat_interval_ms(20);
    response->set_lease_timeout_ms(1000);
    return grpc::Status::OK;
  }

  grpc::Status Heartbeat(grpc::ServerContext*,
                         const v1::HeartbeatRequest* request,
                         v1::HeartbeatResponse* response) override {
    absl::MutexLock lock(&mu_);
    ++heartbeats_;
    credentials_.insert(request->worker_id() + "/" + request->token());
    response->set_epoch(1);
    response->set_state(v1::MEMBER_STATE_ACTIVE);
    return grpc::Status::OK;
  }

  grpc::Status WatchPlan(grpc::ServerContext* context,
                         const v1::WatchPlanRequest* request,
                         grpc::ServerWriter<v1::PlanUpdate>* writer) override {
    {
      absl::MutexLock lock(&mu_);
      ++watches_;
      credentials_.insert(request->worker_id() + "/" + request->token());
    }
    v1::PlanUpdate update;
    update.set_epoch(1);
    update.set_phase(v1::PLAN_PHASE_COMMITTED);
    update.set_world(1);
    update.set_instances(1);
    v1::Assignment* a = update.add_assignments();
    a->set_worker_id(request->worker_id());
    a->set_rank(0);
    writer->Write(update);
    absl::MutexLock lock(&mu_);
    auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return shutdown_ || context->IsCancelled();
    };
    while (!done()) {
      mu_.AwaitWithTimeout(absl::Condition(&done), absl::Milliseconds(5));
    }
    return grpc::Status::OK;
  }

  grpc::Status AckTransition(grpc::ServerContext*,
                             const v1::AckTransitionRequest*,
                             v1::AckTransitionResponse*) override {
    return grpc::Status::OK;
  }

  grpc::Status Leave(grpc::ServerContext*, const v1::LeaveRequest*,
                     v1::LeaveResponse*) override {
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
  int watches() {
    absl::MutexLock lock(&mu_);
    return watches_;
  }
  std::set<std::string> credentials() {
    absl::MutexLock lock(&mu_);
    return credentials_;
  }

 private:
  const std::string id_prefix_;
  absl::Mutex mu_;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  int joins_ ABSL_GUARDED_BY(mu_) = 0;
  int heartbeats_ ABSL_GUARDED_BY(mu_) = 0;
  int watches_ ABSL_GUARDED_BY(mu_) = 0;
  std::set<std::string> credentials_ ABSL_GUARDED_BY(mu_);
};

// `service` served on 127.0.0.1:0; the address in `address`.
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

TEST(SessionFailoverTest, FollowsTheNewLeaderWithItsIdAndToken) {
  FakeLeader old_leader("old");
  FakeLeader new_leader("new");
  std::string old_address;
  std::string new_address;
  std::unique_ptr<grpc::Server> old_server = Serve(&old_leader, &old_address);
  std::unique_ptr<grpc::Server> new_server = Serve(&new_leader, &new_address);
  ASSERT_NE(old_server, nullptr);
  ASSERT_NE(new_server, nullptr);
  // The standby names the new leader, as the surviving coordinators do
  // once one of them leads.
  auto standby = ::zshard::testing::FakeStandby::Start(new_address);
  ASSERT_TRUE(standby.ok()) << standby.status();

  net::ChannelOptions channel;
  channel.target = absl::StrCat(old_address, ",", (*standby)->address());
  auto coordinators = net::LeaderFollower::Create(channel);
  ASSERT_TRUE(coordinators.ok()) << coordinators.status();
  CoordinatorSession::Options options;
  options.name = "w0";
  options.min_backoff_ms = 5;
  options.max_backoff_ms = 20;
  CoordinatorSession session(options, *std::move(coordinators));
  absl::StatusOr<SessionOutcome> outcome = absl::UnknownError("running");
  std::thread run([&] { outcome = session.Run(); });

  ASSERT_TRUE(WaitFor([&] { return session.step() > 5; }, 5000, 2));
  EXPECT_EQ(session.worker_id(), "old-1");
  EXPECT_EQ(old_leader.joins(), 1);
  EXPECT_EQ(old_leader.watches(), 1);

  // The old leader dies (its calls cancelled, its port closed).
  old_leader.Shutdown();
  old_server->Shutdown(std::chrono::system_clock::now());
  const auto killed = std::chrono::steady_clock::now();
  ASSERT_TRUE(WaitFor(
      [&] { return new_leader.heartbeats() > 0 && new_leader.watches() > 0; },
      5000, 2));
  // Within a few heartbeat intervals, not a lease: no new join, the same
  // credentials on heartbeats and the plan watch, and the steps go on.
  EXPECT_LT(std::chrono::steady_clock::now() - killed,
            std::chrono::milliseconds(1500));
  const int64_t step = session.step();
  ASSERT_TRUE(WaitFor([&] { return session.step() > step + 5; }, 5000, 2));
  EXPECT_EQ(new_leader.joins(), 0);
  EXPECT_EQ(new_leader.credentials(), std::set<std::string>{"old-1/old-token"});
  EXPECT_EQ(session.worker_id(), "old-1");
  EXPECT_TRUE(session.alive());
  EXPECT_GE((*standby)->calls(), 1);

  session.Stop();
  run.join();
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(*outcome, SessionOutcome::kStopped);
  new_leader.Shutdown();
  new_server->Shutdown(std::chrono::system_clock::now());
}

}  // namespace
}  // namespace zshard::worker
