// Tests of the coordinator list and the leader follower against real gRPC
// servers on 127.0.0.1: fake standbys that name the leader (or none yet),
// a leader answering DashboardService.GetClusterStatus, and an address
// nothing listens on.

#include "common/net/leader_follower.h"

#include <atomic>
#include <chrono>
#include <optional>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/net/coordinator_list.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "tests/common/net/fake_standby.h"
#include "tests/testing/free_port.h"
#include "zshard/v1/dashboard_service.grpc.pb.h"

namespace zshard::net {
namespace {

using ::zshard::testing::FakeStandby;

// The leader: answers GetClusterStatus with its job name, or with
// `refusal` when one is set.
class LeaderService final : public v1::DashboardService::Service {
 public:
  grpc::Status GetClusterStatus(
      grpc::ServerContext*, const v1::GetClusterStatusRequest*,
      v1::GetClusterStatusResponse* response) override {
    ++calls;
    if (refusal.has_value()) return *refusal;
    response->set_job("from-the-leader");
    return grpc::Status::OK;
  }
  std::atomic<int> calls{0};
  std::optional<grpc::Status> refusal;
};

class LeaderFollowerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.RegisterService(&leader_service_);
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    leader_server_ = builder.BuildAndStart();
    ASSERT_NE(leader_server_, nullptr);
    leader_ = absl::StrCat("127.0.0.1:", port);
    const int dead_port = ::zshard::testing::PickFreePort();
    ASSERT_NE(dead_port, 0);
    dead_ = absl::StrCat("127.0.0.1:", dead_port);
  }
  void TearDown() override { leader_server_->Shutdown(); }

  static std::unique_ptr<FakeStandby> Standby(const std::string& leader) {
    auto standby = FakeStandby::Start(leader);
    EXPECT_TRUE(standby.ok()) << standby.status();
    return standby.ok() ? *std::move(standby) : nullptr;
  }

  static std::unique_ptr<LeaderFollower> Follower(
      const std::vector<std::string>& addresses) {
    ChannelOptions options;
    options.target = absl::StrJoin(addresses, ",");
    auto follower = LeaderFollower::Create(options);
    EXPECT_TRUE(follower.ok()) << follower.status();
    return follower.ok() ? *std::move(follower) : nullptr;
  }

  // GetClusterStatus through CallOnLeader; the job name on success.
  static grpc::Status Ask(LeaderFollower& follower, std::string* job) {
    v1::GetClusterStatusResponse response;
    grpc::Status status = CallOnLeader(
        follower,
        [] {
          auto context = std::make_unique<grpc::ClientContext>();
          context->set_deadline(std::chrono::system_clock::now() +
                                std::chrono::seconds(5));
          return context;
        },
        [&](const std::shared_ptr<grpc::Channel>& channel,
            grpc::ClientContext* context) {
          return v1::DashboardService::NewStub(channel)->GetClusterStatus(
              context, v1::GetClusterStatusRequest(), &response);
        });
    if (status.ok()) *job = response.job();
    return status;
  }

  LeaderService leader_service_;
  std::unique_ptr<grpc::Server> leader_server_;
  std::string leader_;
  std::string dead_;
};

TEST(CoordinatorListTest, ParsesOneAddressOrAList) {
  auto one = ParseCoordinatorList("coord:7070");
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(*one, std::vector<std::string>({"coord:7070"}));
  auto three = ParseCoordinatorList("a:1, b.example:65535 ,[::1]:7070");
  ASSERT_TRUE(three.ok()) << three.status();
  EXPECT_EQ(*three,
            std::vector<std::string>({"a:1", "b.example:65535", "[::1]:7070"}));
}

TEST(CoordinatorListTest, RefusesBadListsWithOneLine) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "coordinator address is empty"},
      {"a:1,,b:2", "coordinator list 'a:1,,b:2' has an empty entry"},
      {"a:1,", "coordinator list 'a:1,' has an empty entry"},
      {"a:1,b", "coordinator address 'b' has no port (HOST:PORT)"},
      {"b:", "coordinator address 'b:' has no port (HOST:PORT)"},
      {":7070", "coordinator address ':7070' has no host (HOST:PORT)"},
      {"a:x1", "coordinator address 'a:x1' has a bad port 'x1' (1 to 65535)"},
      {"a:0", "coordinator address 'a:0' has a bad port '0' (1 to 65535)"},
      {"a:70000",
       "coordinator address 'a:70000' has a bad port '70000' (1 to 65535)"},
      {"::1:7070",
       "coordinator address '::1:7070' is not HOST:PORT (write "
       "IPv6 as [ADDR]:PORT)"},
      {"a:1,a:1", "coordinator list 'a:1,a:1' names 'a:1' twice"},
  };
  for (const auto& [list, message] : cases) {
    auto parsed = ParseCoordinatorList(list);
    ASSERT_FALSE(parsed.ok()) << list;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(parsed.status().message(), message);
  }
  ChannelOptions options;
  options.target = "a:1,,b:2";
  EXPECT_EQ(LeaderFollower::Create(options).status().message(),
            "coordinator list 'a:1,,b:2' has an empty entry");
}

TEST_F(LeaderFollowerTest, OneAddressWorksAsBefore) {
  auto follower = Follower({leader_});
  ASSERT_NE(follower, nullptr);
  EXPECT_EQ(follower->Current().address, leader_);
  std::string job;
  ASSERT_TRUE(Ask(*follower, &job).ok());
  EXPECT_EQ(job, "from-the-leader");
  EXPECT_EQ(follower->Current().generation, 0u);
}

TEST_F(LeaderFollowerTest, StandbyNamingTheLeaderRedirectsAtOnce) {
  auto standby = Standby(leader_);
  ASSERT_NE(standby, nullptr);
  auto follower = Follower({standby->address(), leader_});
  ASSERT_NE(follower, nullptr);
  std::string job;
  grpc::Status status = Ask(*follower, &job);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(job, "from-the-leader");
  EXPECT_EQ(standby->calls(), 1);
  EXPECT_EQ(standby->last_method(),
            "/zshard.v1.DashboardService/GetClusterStatus");
  EXPECT_EQ(leader_service_.calls.load(), 1);
  EXPECT_EQ(follower->Current().address, leader_);
  // Later calls go straight to the leader.
  ASSERT_TRUE(Ask(*follower, &job).ok());
  EXPECT_EQ(standby->calls(), 1);
  EXPECT_EQ(leader_service_.calls.load(), 2);
}

TEST_F(LeaderFollowerTest, NamedLeaderOutsideTheListIsAdded) {
  auto standby = Standby(leader_);
  ASSERT_NE(standby, nullptr);
  auto follower = Follower({standby->address()});
  ASSERT_NE(follower, nullptr);
  std::string job;
  ASSERT_TRUE(Ask(*follower, &job).ok());
  EXPECT_EQ(job, "from-the-leader");
  EXPECT_EQ(follower->size(), 2u);
  EXPECT_EQ(follower->Current().address, leader_);
  EXPECT_EQ(follower->Current().index, 1u);
  EXPECT_EQ(follower->list(), standby->address());
}

TEST_F(LeaderFollowerTest, DeadAddressAndStandbyWithoutLeaderAreSkipped) {
  auto unsure = Standby("");
  ASSERT_NE(unsure, nullptr);
  auto follower = Follower({dead_, unsure->address(), leader_});
  ASSERT_NE(follower, nullptr);
  std::string job;
  grpc::Status status = Ask(*follower, &job);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(job, "from-the-leader");
  EXPECT_EQ(unsure->calls(), 1);
  EXPECT_EQ(follower->Current().address, leader_);
  EXPECT_EQ(follower->Current().generation, 2u);
}

TEST_F(LeaderFollowerTest, NoLeaderAnywhereEndsWithTheStandbysAnswer) {
  auto a = Standby("");
  auto b = Standby("");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  auto follower = Follower({a->address(), dead_, b->address()});
  ASSERT_NE(follower, nullptr);
  std::string job;
  grpc::Status status = Ask(*follower, &job);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  // 2 * 3 + 1 attempts: a, dead, b, a, dead, b, a.
  EXPECT_EQ(a->calls(), 3);
  EXPECT_EQ(b->calls(), 2);
  EXPECT_EQ(status.error_message(), "standby coordinator: no leader yet");
}

TEST_F(LeaderFollowerTest, OneDeadAddressIsTriedOnce) {
  auto follower = Follower({dead_});
  ASSERT_NE(follower, nullptr);
  std::string job;
  EXPECT_EQ(Ask(*follower, &job).error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(follower->Current().generation, 0u);
  EXPECT_EQ(follower->Current().address, dead_);
}

TEST_F(LeaderFollowerTest, OtherErrorsDoNotMove) {
  leader_service_.refusal =
      grpc::Status(grpc::StatusCode::NOT_FOUND, "no such thing");
  auto standby = Standby(leader_);
  ASSERT_NE(standby, nullptr);
  auto follower = Follower({leader_, standby->address()});
  ASSERT_NE(follower, nullptr);
  std::string job;
  EXPECT_EQ(Ask(*follower, &job).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(follower->Current().address, leader_);
  EXPECT_EQ(standby->calls(), 0);
  // DEADLINE_EXCEEDED moves only when the caller says it means
  // unreachable.
  grpc::ClientContext context;
  const LeaderFollower::Pick pick = follower->Current();
  const grpc::Status deadline(grpc::StatusCode::DEADLINE_EXCEEDED, "late");
  EXPECT_EQ(follower->OnFailure(pick, deadline, context),
            LeaderFollower::Move::kStayed);
  EXPECT_EQ(follower->OnFailure(pick, deadline, context, true),
            LeaderFollower::Move::kToNext);
  EXPECT_EQ(follower->Current().address, standby->address());
}

TEST_F(LeaderFollowerTest, LeaderNamingItselfFallsBackToRoundRobin) {
  auto follower = Follower({leader_, dead_});
  ASSERT_NE(follower, nullptr);
  EXPECT_EQ(follower->Follow(follower->Current(), leader_),
            LeaderFollower::Move::kToNext);
  EXPECT_EQ(follower->Current().address, dead_);
  // A named leader that is not HOST:PORT is ignored too.
  EXPECT_EQ(follower->Follow(follower->Current(), "garbage"),
            LeaderFollower::Move::kToNext);
  EXPECT_EQ(follower->Current().address, leader_);
  EXPECT_EQ(follower->size(), 2u);
}

TEST_F(LeaderFollowerTest, ManyReportsOfOneFailureMoveOnce) {
  auto follower = Follower({dead_, leader_, "127.0.0.1:1"});
  ASSERT_NE(follower, nullptr);
  const LeaderFollower::Pick used = follower->Current();
  std::atomic<int> moved{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      if (follower->Follow(used, "") != LeaderFollower::Move::kStayed) {
        ++moved;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(moved.load(), 1);
  EXPECT_EQ(follower->Current().address, leader_);
  EXPECT_EQ(follower->Current().generation, 1u);
  // A stale report of the old address moves nothing; one of the current
  // address does.
  EXPECT_EQ(follower->Follow(used, ""), LeaderFollower::Move::kStayed);
  EXPECT_EQ(follower->Follow(follower->Current(), ""),
            LeaderFollower::Move::kToNext);
  EXPECT_EQ(follower->Current().address, "127.0.0.1:1");
}

}  // namespace
}  // namespace zshard::net
