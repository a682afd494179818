// Worker sessions against the real coordinator, in process on 127.0.0.1:
// sessions form a world and step; the rendezvous store they get works
// within an epoch, refuses a stale epoch, and never shows one epoch's keys
// to the next.

#include <thread>

#include "client/worker/session/coordinator_session.h"
#include "common/job/job_spec.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "server/coordinator.h"
#include "tests/testing/wait_for.h"

namespace zshard::worker {
namespace {

using ::zshard::testing::WaitFor;

constexpr char kJob[] = R"({
  "name": "session-test",
  "model": {"preset": "gpt2-small"},
  "world": {"instances": 1, "min": 2, "max": 3},
  "lease_timeout_ms": 1000, "heartbeat_interval_ms": 20,
  "workload": {"kind": "idle", "steps": 0, "step_delay_ms": 2}
})";

// A session running on its own thread.
struct RunningSession {
  RunningSession(const std::string& name,
                 std::shared_ptr<grpc::Channel> channel) {
    CoordinatorSession::Options options;
    options.name = name;
    options.min_backoff_ms = 5;
    options.max_backoff_ms = 50;
    session = std::make_unique<CoordinatorSession>(options, channel);
    thread = std::thread([this] { outcome = session->Run(); });
  }
  ~RunningSession() {
    session->Stop();
    thread.join();
  }
  std::unique_ptr<CoordinatorSession> session;
  std::thread thread;
  absl::StatusOr<SessionOutcome> outcome = absl::UnknownError("running");
};

class SessionWithCoordinatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto spec = job::ParseJobSpec(kJob);
    ASSERT_TRUE(spec.ok()) << spec.status();
    auto coordinator = server::Coordinator::Start(*std::move(spec),
                                                  server::CoordinatorOptions());
    ASSERT_TRUE(coordinator.ok()) << coordinator.status();
    coordinator_ = *std::move(coordinator);
    channel_ = grpc::CreateChannel(coordinator_->address(),
                                   grpc::InsecureChannelCredentials());
  }

  // True once every session runs `epoch` (>= 1) and has stepped.
  static bool AllIn(const std::vector<RunningSession*>& sessions,
                    int64_t min_epoch) {
    int64_t epoch = sessions[0]->session->epoch();
    for (RunningSession* s : sessions) {
      if (s->session->epoch() < min_epoch || s->session->epoch() != epoch ||
          s->session->step() == 0) {
        return false;
      }
    }
    return true;
  }

  std::unique_ptr<server::Coordinator> coordinator_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(SessionWithCoordinatorTest, WorldFormsAndRendezvousIsScopedByEpoch) {
  RunningSession a("a", channel_);
  RunningSession b("b", channel_);
  ASSERT_TRUE(WaitFor([&] { return AllIn({&a, &b}, 1); }, 10000, 5));
  const int64_t e1 = a.session->epoch();

  auto store_a = a.session->NewKvStore(e1);
  auto store_b = b.session->NewKvStore(e1);
  ASSERT_TRUE(store_a->Set("group/rank0", "addr-a").ok());
  auto value = store_b->Get("group/rank0", 2000);
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, "addr-a");
  EXPECT_TRUE(store_b->Wait({"group/rank0"}, 1000).ok());
  EXPECT_EQ(store_b->Get("group/missing", 30).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(a.session->NewKvStore(e1 + 100)->Set("k", "v").code(),
            absl::StatusCode::kFailedPrecondition);

  // A third member makes a new epoch; its namespace starts empty and the
  // old epoch's store is refused.
  RunningSession c("c", channel_);
  ASSERT_TRUE(WaitFor([&] { return AllIn({&a, &b, &c}, e1 + 1); }, 10000, 5));
  const int64_t e2 = a.session->epoch();
  EXPECT_EQ(a.session->NewKvStore(e2)->Get("group/rank0", 30).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(store_b->Get("group/rank0", 30).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace zshard::worker
