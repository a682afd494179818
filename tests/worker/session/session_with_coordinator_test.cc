// Worker sessions against the real coordinator, in process on 127.0.0.1:
// sessions form a world and step; the rendezvous store they get works
// within an epoch, refuses a stale epoch, and never shows one epoch's keys
// to the next. With a standby coordinator first in the address list, the
// sessions follow it to the leader it names, join and train there, and a
// rendezvous store given that list follows it too, and waits out an
// election (standbys with no leader yet) within its deadline.

#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/worker/session/coordinator_session.h"
#include "common/job/job_spec.h"
#include "gtest/gtest.h"
#include "server/coordinator.h"
#include "tests/common/net/fake_standby.h"
#include "tests/testing/free_port.h"
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

// Two workers train a small bf16 model for 6 steps, then the job is done.
constexpr char kTrainingJob[] = R"({
  "name": "session-train-test",
  "model": {"params": [{"name": "p0", "shape": [300], "dtype": "bf16"},
                       {"name": "p1", "shape": [77], "dtype": "bf16"}]},
  "layout": {"bucket_size": 128},
  "world": {"instances": 1, "min": 2, "max": 2},
  "lease_timeout_ms": 2000, "heartbeat_interval_ms": 20,
  "workload": {"kind": "synthetic", "steps": 6, "global_batch": 4}
})";

// One follower per session, as one worker process has: `coordinators` is
// the --coordinator list.
std::shared_ptr<net::LeaderFollower> Follower(const std::string& coordinators) {
  net::ChannelOptions options;
  options.target = coordinators;
  auto follower = net::LeaderFollower::Create(options);
  EXPECT_TRUE(follower.ok()) << follower.status();
  return follower.ok() ? *std::move(follower) : nullptr;
}

// A session running on its own thread.
struct RunningSession {
  RunningSession(const std::string& name, const std::string& coordinators) {
    CoordinatorSession::Options options;
    options.name = name;
    options.min_backoff_ms = 5;
    options.max_backoff_ms = 50;
    session =
        std::make_unique<CoordinatorSession>(options, Follower(coordinators));
    thread = std::thread([this] { outcome = session->Run(); });
  }
  ~RunningSession() {
    session->Stop();
    if (thread.joinable()) thread.join();
  }
  std::unique_ptr<CoordinatorSession> session;
  std::thread thread;
  absl::StatusOr<SessionOutcome> outcome = absl::UnknownError("running");
};

class SessionWithCoordinatorTest : public ::testing::Test {
 protected:
  void SetUp() override { StartCoordinator(kJob); }

  void StartCoordinator(const char* job) {
    auto spec = job::ParseJobSpec(job);
    ASSERT_TRUE(spec.ok()) << spec.status();
    auto coordinator = server::Coordinator::Start(*std::move(spec),
                                                  server::CoordinatorOptions());
    ASSERT_TRUE(coordinator.ok()) << coordinator.status();
    coordinator_ = *std::move(coordinator);
    address_ = coordinator_->address();
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
  std::string address_;
};

TEST_F(SessionWithCoordinatorTest, WorldFormsAndRendezvousIsScopedByEpoch) {
  RunningSession a("a", address_);
  RunningSession b("b", address_);
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
  RunningSession c("c", address_);
  ASSERT_TRUE(WaitFor([&] { return AllIn({&a, &b, &c}, e1 + 1); }, 10000, 5));
  const int64_t e2 = a.session->epoch();
  EXPECT_EQ(a.session->NewKvStore(e2)->Get("group/rank0", 30).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(store_b->Get("group/rank0", 30).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(SessionWithCoordinatorTest, RendezvousStoreFollowsAStandby) {
  RunningSession a("a", address_);
  RunningSession b("b", address_);
  ASSERT_TRUE(WaitFor([&] { return AllIn({&a, &b}, 1); }, 10000, 5));
  auto standby = ::zshard::testing::FakeStandby::Start(address_);
  ASSERT_TRUE(standby.ok()) << standby.status();
  // A store of a's incarnation whose list starts with the standby.
  CoordinatorKvStore::Options options;
  options.worker_id = a.session->worker_id();
  options.token = a.session->NewKvStore(0)->options().token;
  options.epoch = a.session->epoch();
  CoordinatorKvStore store(
      options, Follower(absl::StrCat((*standby)->address(), ",", address_)));
  ASSERT_TRUE(store.Set("via/standby", "v1").ok());
  EXPECT_EQ((*standby)->calls(), 1);
  EXPECT_EQ((*standby)->last_method(), "/zshard.v1.RendezvousService/Set");
  auto value = b.session->NewKvStore(options.epoch)->Get("via/standby", 2000);
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, "v1");
  // Later calls go to the leader directly.
  EXPECT_TRUE(store.Wait({"via/standby"}, 1000).ok());
  EXPECT_EQ((*standby)->calls(), 1);
}

// Two standbys with no leader yet, as during a failover's election, and
// a rendezvous store of `session`'s epoch given only them.
struct Election {
  Election(RunningSession& session, int64_t rpc_margin_ms) {
    auto a = ::zshard::testing::FakeStandby::Start("");
    auto b = ::zshard::testing::FakeStandby::Start("");
    EXPECT_TRUE(a.ok() && b.ok());
    first = *std::move(a);
    second = *std::move(b);
    options = session.session->NewKvStore(0)->options();
    options.epoch = session.session->epoch();
    options.rpc_margin_ms = rpc_margin_ms;
    options.min_backoff_ms = 5;
    options.max_backoff_ms = 20;
    store = std::make_unique<CoordinatorKvStore>(
        options,
        Follower(absl::StrCat(first->address(), ",", second->address())));
  }
  std::unique_ptr<::zshard::testing::FakeStandby> first, second;
  CoordinatorKvStore::Options options;
  std::unique_ptr<CoordinatorKvStore> store;
};

TEST_F(SessionWithCoordinatorTest, RendezvousStoreWaitsOutAnElection) {
  RunningSession a("a", address_);
  RunningSession b("b", address_);
  ASSERT_TRUE(WaitFor([&] { return AllIn({&a, &b}, 1); }, 10000, 5));
  Election election(a, 20000);
  absl::Status set = absl::UnknownError("running");
  std::thread setter(
      [&] { set = election.store->Set("after/election", "v2"); });
  // The store keeps asking; then the first standby learns the leader.
  ASSERT_TRUE(WaitFor([&] { return election.first->calls() >= 3; }, 10000, 2));
  election.first->set_leader(address_);
  setter.join();
  ASSERT_TRUE(set.ok()) << set;
  auto value = b.session->NewKvStore(election.options.epoch)
                   ->Get("after/election", 2000);
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, "v2");
}

// The time without a leader does not count against a blocking call: a
// Wait whose whole timeout passed in an election still gets that timeout
// to see a peer's key, set after the election by a peer it held up too.
TEST_F(SessionWithCoordinatorTest, AnElectionDoesNotEatTheRendezvousTimeout) {
  RunningSession a("a", address_);
  RunningSession b("b", address_);
  ASSERT_TRUE(WaitFor([&] { return AllIn({&a, &b}, 1); }, 10000, 5));
  Election election(a, 200);
  absl::Status waited = absl::UnknownError("running");
  std::thread waiter(
      [&] { waited = election.store->Wait({"late/key"}, 1000); });
  // The election outlasts the Wait's timeout.
  absl::SleepFor(absl::Milliseconds(1500));
  election.first->set_leader(address_);
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_TRUE(
      b.session->NewKvStore(election.options.epoch)->Set("late/key", "v").ok());
  waiter.join();
  EXPECT_TRUE(waited.ok()) << waited;
}

TEST_F(SessionWithCoordinatorTest, StandbyFirstInTheListLeadsToTheLeader) {
  coordinator_.reset();
  StartCoordinator(kTrainingJob);
  auto standby = ::zshard::testing::FakeStandby::Start(address_);
  ASSERT_TRUE(standby.ok()) << standby.status();
  const int dead_port = ::zshard::testing::PickFreePort();
  ASSERT_NE(dead_port, 0);
  // Worker a: the standby first; worker b: a dead address, then the
  // standby.
  RunningSession a("a", absl::StrCat((*standby)->address(), ",", address_));
  RunningSession b("b", absl::StrCat("127.0.0.1:", dead_port, ",",
                                     (*standby)->address(), ",", address_));
  ASSERT_TRUE(WaitFor(
      [&] {
        return a.session->step() >= 6 && b.session->step() >= 6 &&
               !a.session->alive() && !b.session->alive();
      },
      30000, 5))
      << "steps " << a.session->step() << ", " << b.session->step();
  a.thread.join();
  b.thread.join();
  ASSERT_TRUE(a.outcome.ok()) << a.outcome.status();
  ASSERT_TRUE(b.outcome.ok()) << b.outcome.status();
  EXPECT_EQ(*a.outcome, SessionOutcome::kDone);
  EXPECT_EQ(*b.outcome, SessionOutcome::kDone);
  EXPECT_EQ(a.session->step(), 6);
  EXPECT_EQ(b.session->step(), 6);
  // Each worker asked the standby once (its join) and then stayed with
  // the leader, through the rendezvous of the epoch and every step.
  EXPECT_EQ((*standby)->calls(), 2);
  EXPECT_EQ((*standby)->last_method(), "/zshard.v1.WorkerService/Join");
}

}  // namespace
}  // namespace zshard::worker
