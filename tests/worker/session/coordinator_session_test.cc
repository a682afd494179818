// Tests of CoordinatorSession against an in-process gRPC WorkerService on
// 127.0.0.1 whose answers the test controls: join, transition acks and
// stepping, graceful leave, fencing, the job's end, a rejoin when the
// coordinator forgets the worker, a refused join, a job the coordinator
// failed, and a leave that hands the worker's state over first.

#include "client/worker/session/coordinator_session.h"

#include <atomic>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "tests/testing/wait_for.h"
#include "zshard/v1/worker_service.grpc.pb.h"

namespace zshard::worker {
namespace {

using ::zshard::testing::WaitFor;

// A scripted coordinator: every join gets a new id and token; the watch
// stream sends one COMMITTED epoch with the worker at rank 0.
class FakeWorkerService final : public v1::WorkerService::Service {
 public:
  grpc::Status Join(grpc::ServerContext*, const v1::JoinRequest* request,
                    v1::JoinResponse* response) override {
    absl::MutexLock lock(&mu_);
    if (refuse_join_) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "bad name");
    }
    ++joins_;
    response->set_worker_id(absl::StrCat("id-", joins_));
    response->set_token(absl::StrCat("tok-", joins_));
    response->set_job_name("fake");
    response->set_job_spec_json(
        absl::StrCat(R"({"workload":{"kind":"idle","step_delay_ms":2,"steps":)",
                     steps_, "}}"));
    response->set_heartbeat_interval_ms(10);
    response->set_lease_timeout_ms(100);
    last_name_ = request->name();
    return grpc::Status::OK;
  }

  grpc::Status Heartbeat(grpc::ServerContext*,
                         const v1::HeartbeatRequest* request,
                         v1::HeartbeatResponse* response) override {
    absl::MutexLock lock(&mu_);
    ++heartbeats_;
    last_step_ = request->step();
    if (forget_next_heartbeat_) {
      forget_next_heartbeat_ = false;
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown worker");
    }
    if (fenced_) {
      ++refused_;
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "fenced");
    }
    response->set_epoch(1);
    response->set_state(v1::MEMBER_STATE_ACTIVE);
    response->set_command(command_);
    response->set_job_failed(job_failed_);
    response->set_exit_reason(exit_reason_);
    return grpc::Status::OK;
  }

  grpc::Status WatchPlan(grpc::ServerContext* context,
                         const v1::WatchPlanRequest* request,
                         grpc::ServerWriter<v1::PlanUpdate>* writer) override {
    v1::PlanUpdate update;
    update.set_epoch(1);
    update.set_phase(v1::PLAN_PHASE_COMMITTED);
    update.set_world(1);
    update.set_instances(1);
    update.set_resume_step(5);
    v1::Assignment* a = update.add_assignments();
    a->set_worker_id(request->worker_id());
    a->set_rank(0);
    writer->Write(update);
    absl::MutexLock lock(&mu_);
    while (!context->IsCancelled() && !shutdown_) {
      auto wake = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return shutdown_ || !queued_.empty();
      };
      mu_.AwaitWithTimeout(absl::Condition(&wake), absl::Milliseconds(5));
      for (v1::PlanUpdate& next : queued_) {
        next.mutable_assignments(0)->set_worker_id(request->worker_id());
        writer->Write(next);
      }
      queued_.clear();
    }
    return grpc::Status::OK;
  }

  grpc::Status AckTransition(grpc::ServerContext*,
                             const v1::AckTransitionRequest* request,
                             v1::AckTransitionResponse*) override {
    absl::MutexLock lock(&mu_);
    if (request->phase() == v1::ACK_PHASE_ACTIVE) ++active_acks_;
    return grpc::Status::OK;
  }

  grpc::Status Leave(grpc::ServerContext*, const v1::LeaveRequest* request,
                     v1::LeaveResponse* response) override {
    absl::MutexLock lock(&mu_);
    if (refuse_during_leave_) {
      // The member is gone before the Leave's reply: a heartbeat is
      // refused first.
      fenced_ = true;
      const int seen = refused_;
      auto refused = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return refused_ > seen;
      };
      mu_.AwaitWithTimeout(absl::Condition(&refused), absl::Seconds(5));
    }
    leave_reason_ = request->reason();
    // The first leave of a worker holding state hands it over.
    response->set_handover(handover_ && leaves_ == 0);
    ++leaves_;
    return grpc::Status::OK;
  }

  // Queues an update for the watch stream; its first assignment is this
  // worker's and gets its id.
  void Queue(int64_t epoch, v1::PlanPhase phase, int64_t base_epoch, int rank) {
    v1::PlanUpdate update;
    update.set_epoch(epoch);
    update.set_phase(phase);
    update.set_base_epoch(base_epoch);
    update.set_world(1);
    update.set_instances(1);
    v1::Assignment* a = update.add_assignments();
    a->set_rank(rank);
    absl::MutexLock lock(&mu_);
    queued_.push_back(update);
  }

  absl::Mutex mu_;
  bool refuse_join_ ABSL_GUARDED_BY(mu_) = false;
  bool fenced_ ABSL_GUARDED_BY(mu_) = false;
  bool refuse_during_leave_ ABSL_GUARDED_BY(mu_) = false;
  int refused_ ABSL_GUARDED_BY(mu_) = 0;
  bool forget_next_heartbeat_ ABSL_GUARDED_BY(mu_) = false;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  int64_t steps_ ABSL_GUARDED_BY(mu_) = 0;
  v1::Command command_ ABSL_GUARDED_BY(mu_) = v1::COMMAND_UNSPECIFIED;
  bool job_failed_ ABSL_GUARDED_BY(mu_) = false;
  std::string exit_reason_ ABSL_GUARDED_BY(mu_);
  bool handover_ ABSL_GUARDED_BY(mu_) = false;
  int leaves_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<v1::PlanUpdate> queued_ ABSL_GUARDED_BY(mu_);
  int joins_ ABSL_GUARDED_BY(mu_) = 0;
  int heartbeats_ ABSL_GUARDED_BY(mu_) = 0;
  int active_acks_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t last_step_ ABSL_GUARDED_BY(mu_) = 0;
  std::string last_name_ ABSL_GUARDED_BY(mu_);
  std::string leave_reason_ ABSL_GUARDED_BY(mu_);
};

class CoordinatorSessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    net::ChannelOptions channel;
    channel.target = absl::StrCat("127.0.0.1:", port);
    auto coordinators = net::LeaderFollower::Create(channel);
    ASSERT_TRUE(coordinators.ok()) << coordinators.status();
    coordinators_ = *std::move(coordinators);
    CoordinatorSession::Options options;
    options.name = "w0";
    options.min_backoff_ms = 5;
    options.max_backoff_ms = 20;
    session_ = std::make_unique<CoordinatorSession>(options, coordinators_);
  }

  void TearDown() override {
    session_->Stop();
    if (runner_.joinable()) runner_.join();
    {
      absl::MutexLock lock(&service_.mu_);
      service_.shutdown_ = true;
    }
    server_->Shutdown();
  }

  void StartRun() {
    runner_ = std::thread([this] { result_ = session_->Run(); });
  }

  // Waits for the session to end and returns its result.
  absl::StatusOr<SessionOutcome> Finish() {
    runner_.join();
    return result_;
  }

  bool WaitActive() {
    return WaitFor(
        [&] {
          absl::MutexLock lock(&service_.mu_);
          return service_.active_acks_ > 0 && session_->step() > 5;
        },
        5000, 1);
  }

  FakeWorkerService service_;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<net::LeaderFollower> coordinators_;
  std::unique_ptr<CoordinatorSession> session_;
  std::thread runner_;
  absl::StatusOr<SessionOutcome> result_ = absl::UnknownError("not run");
};

TEST_F(CoordinatorSessionTest, StepsFromResumeStepAndLeavesOnStop) {
  StartRun();
  ASSERT_TRUE(WaitActive());
  EXPECT_EQ(session_->epoch(), 1);
  EXPECT_EQ(session_->worker_id(), "id-1");
  ASSERT_TRUE(WaitFor(
      [&] {
        absl::MutexLock lock(&service_.mu_);
        return service_.last_step_ > 5;
      },
      5000, 1));
  session_->Stop();
  auto outcome = Finish();
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(*outcome, SessionOutcome::kStopped);
  absl::MutexLock lock(&service_.mu_);
  EXPECT_EQ(service_.leave_reason_, "stopped by signal");
  EXPECT_EQ(service_.last_name_, "w0");
}

// A heartbeat refused while the Leave is in flight (the coordinator let the
// member go before its reply arrived) ends the session as a stop.
TEST_F(CoordinatorSessionTest, RefusalDuringLeaveIsAStopNotAFence) {
  StartRun();
  ASSERT_TRUE(WaitActive());
  {
    absl::MutexLock lock(&service_.mu_);
    service_.refuse_during_leave_ = true;
  }
  session_->Stop();
  auto outcome = Finish();
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(*outcome, SessionOutcome::kStopped);
  absl::MutexLock lock(&service_.mu_);
  EXPECT_GT(service_.refused_, 0);
  EXPECT_EQ(service_.leave_reason_, "stopped by signal");
}

TEST_F(CoordinatorSessionTest, RefusedTokenFencesWithoutLeaving) {
  StartRun();
  ASSERT_TRUE(WaitActive());
  {
    absl::MutexLock lock(&service_.mu_);
    service_.fenced_ = true;
  }
  auto outcome = Finish();
  ASSERT_TRUE(outcome.ok());
  EXPECT_EQ(*outcome, SessionOutcome::kFenced);
  absl::MutexLock lock(&service_.mu_);
  EXPECT_EQ(service_.leave_reason_, "");
}

TEST_F(CoordinatorSessionTest, ExitCommandEndsTheJob) {
  StartRun();
  ASSERT_TRUE(WaitActive());
  {
    absl::MutexLock lock(&service_.mu_);
    service_.command_ = v1::COMMAND_EXIT;
  }
  auto outcome = Finish();
  ASSERT_TRUE(outcome.ok());
  EXPECT_EQ(*outcome, SessionOutcome::kDone);
}

TEST_F(CoordinatorSessionTest, FailedJobEndsWithTheCoordinatorsReason) {
  StartRun();
  ASSERT_TRUE(WaitActive());
  {
    absl::MutexLock lock(&service_.mu_);
    service_.command_ = v1::COMMAND_EXIT;
    service_.job_failed_ = true;
    service_.exit_reason_ = "optimizer state of param 'p2' was lost";
  }
  auto outcome = Finish();
  ASSERT_TRUE(outcome.ok());
  EXPECT_EQ(*outcome, SessionOutcome::kFailed);
  EXPECT_EQ(session_->failure_reason(),
            "job failed: optimizer state of param 'p2' was lost");
  absl::MutexLock lock(&service_.mu_);
  EXPECT_EQ(service_.leave_reason_,
            "failed: job failed: optimizer state of param 'p2' was lost");
}

TEST_F(CoordinatorSessionTest, StopHandsTheStateOverBeforeLeaving) {
  {
    absl::MutexLock lock(&service_.mu_);
    service_.handover_ = true;
  }
  StartRun();
  ASSERT_TRUE(WaitActive());
  session_->Stop();
  ASSERT_TRUE(WaitFor(
      [&] {
        absl::MutexLock lock(&service_.mu_);
        return service_.leaves_ == 1;
      },
      5000, 1));
  // Draining: still in the job until an epoch without it is stable.
  EXPECT_TRUE(session_->alive());
  service_.Queue(2, v1::PLAN_PHASE_PROPOSED, 1, -1);
  service_.Queue(2, v1::PLAN_PHASE_COMMITTED, 1, -1);
  EXPECT_TRUE(session_->alive());
  service_.Queue(2, v1::PLAN_PHASE_STABLE, 1, -1);
  auto outcome = Finish();
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(*outcome, SessionOutcome::kDrained);
  EXPECT_EQ(session_->epoch(), 2);
  absl::MutexLock lock(&service_.mu_);
  EXPECT_EQ(service_.leaves_, 2);
  EXPECT_EQ(service_.leave_reason_, "drained");
}

TEST_F(CoordinatorSessionTest, DoneAfterStepsWithoutExitCommand) {
  {
    absl::MutexLock lock(&service_.mu_);
    service_.steps_ = 20;
  }
  StartRun();
  auto outcome = Finish();
  ASSERT_TRUE(outcome.ok());
  EXPECT_EQ(*outcome, SessionOutcome::kDone);
  EXPECT_EQ(session_->step(), 20);
  absl::MutexLock lock(&service_.mu_);
  EXPECT_EQ(service_.leave_reason_, "steps done");
}

TEST_F(CoordinatorSessionTest, RejoinsWhenForgotten) {
  StartRun();
  ASSERT_TRUE(WaitActive());
  {
    absl::MutexLock lock(&service_.mu_);
    service_.forget_next_heartbeat_ = true;
  }
  ASSERT_TRUE(
      WaitFor([&] { return session_->worker_id() == "id-2"; }, 5000, 1));
  absl::MutexLock lock(&service_.mu_);
  EXPECT_EQ(service_.joins_, 2);
}

TEST_F(CoordinatorSessionTest, RefusedJoinIsAnError) {
  {
    absl::MutexLock lock(&service_.mu_);
    service_.refuse_join_ = true;
  }
  StartRun();
  auto outcome = Finish();
  ASSERT_FALSE(outcome.ok());
  EXPECT_EQ(outcome.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace zshard::worker
