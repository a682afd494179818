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

#include "client/worker/session/coordinator_session.h"
#include "gtest/gtest.h"
#include "tests/common/net/fake_leader.h"
#include "tests/testing/wait_for.h"
#include "zshard/v1/worker_service.grpc.pb.h"

namespace zshard::worker {
namespace {

using ::zshard::testing::FailoverScene;
using ::zshard::testing::FakeLeader;
using ::zshard::testing::WaitFor;

TEST(SessionFailoverTest, FollowsTheNewLeaderWithItsIdAndToken) {
  auto scene = FailoverScene::Start();
  ASSERT_TRUE(scene.ok()) << scene.status();
  FakeLeader& old_leader = (*scene)->old_leader();
  FakeLeader& new_leader = (*scene)->new_leader();

  net::ChannelOptions channel;
  channel.target = (*scene)->list();
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
  (*scene)->KillOld();
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
  const std::set<std::string> credentials = {"old-1/old-token-1"};
  EXPECT_EQ(new_leader.heartbeat_ids(), credentials);
  EXPECT_EQ(new_leader.watch_ids(), credentials);
  EXPECT_EQ(session.worker_id(), "old-1");
  EXPECT_TRUE(session.alive());
  EXPECT_GE((*scene)->standby().calls(), 1);

  session.Stop();
  run.join();
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(*outcome, SessionOutcome::kStopped);
}

}  // namespace
}  // namespace zshard::worker
