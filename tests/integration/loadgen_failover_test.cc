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
#include "gtest/gtest.h"
#include "tests/common/net/fake_leader.h"
#include "tests/testing/wait_for.h"
#include "tools/loadgen/load_generator.h"
#include "zshard/v1/worker_service.grpc.pb.h"

namespace zshard::loadgen {
namespace {

using ::zshard::testing::FailoverScene;
using ::zshard::testing::FakeLeader;
using ::zshard::testing::WaitFor;

TEST(LoadgenFailoverTest, SimulatedWorkersFollowTheNewLeader) {
  // Plan watches stay open with no update: the simulated workers stay
  // idle spares.
  ::zshard::testing::FakeLeaderOptions idle;
  idle.commit_on_watch = false;
  auto scene = FailoverScene::Start(idle);
  ASSERT_TRUE(scene.ok()) << scene.status();
  FakeLeader& old_leader = (*scene)->old_leader();
  FakeLeader& new_leader = (*scene)->new_leader();

  constexpr int kWorkers = 16;
  std::vector<std::shared_ptr<net::LeaderFollower>> connections;
  for (int c = 0; c < 2; ++c) {
    net::ChannelOptions channel;
    channel.target = (*scene)->list();
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
  (*scene)->KillOld();
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
}

}  // namespace
}  // namespace zshard::loadgen
