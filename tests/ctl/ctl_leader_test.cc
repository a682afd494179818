// zshardctl with several coordinators: the real binary given a list whose
// first address is a standby (tests/common/net/fake_standby.h) follows it
// to the leader it names. Against an in-test leader that reports itself
// and its standbys, `status` prints both (table and JSON) and `drain`
// carries its admin token through the redirect, as every online command
// follows it; against the real coordinator (in process, SQLite), `status`
// reaches it through the standby. No leader anywhere, or a bad list, is
// one line and exit 3 or 2.
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/file_io.h"
#include "common/job/job_spec.h"
#include "gmock/gmock.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/coordinator.h"
#include "tests/common/net/fake_standby.h"
#include "tests/testing/free_port.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/temp_dir.h"
#include "zshard/v1/admin_service.grpc.pb.h"
#include "zshard/v1/dashboard_service.grpc.pb.h"

namespace zshard::testing {
namespace {

using ::testing::HasSubstr;

// The leader of an HA pair as its dashboard reports it.
class LeaderDashboard final : public v1::DashboardService::Service {
 public:
  grpc::Status GetClusterStatus(grpc::ServerContext*,
                                const v1::GetClusterStatusRequest*,
                                v1::GetClusterStatusResponse* resp) override {
    ++calls_;
    resp->set_job("ha-demo");
    resp->set_epoch(4);
    resp->set_world(2);
    resp->set_instances(1);
    resp->set_leader(leader_);
    for (const std::string& s : standbys_) resp->add_standbys(s);
    v1::MemberStatus* m = resp->add_members();
    m->set_name("w1");
    m->set_state(v1::MEMBER_STATE_ACTIVE);
    return grpc::Status::OK;
  }
  std::string leader_;
  std::vector<std::string> standbys_;
  std::atomic<int> calls_{0};
};

// Drains w1 when the call carries the token.
class LeaderAdmin final : public v1::AdminService::Service {
 public:
  grpc::Status DrainWorker(grpc::ServerContext* ctx,
                           const v1::DrainWorkerRequest* req,
                           v1::DrainWorkerResponse*) override {
    auto it = ctx->client_metadata().find("authorization");
    if (it == ctx->client_metadata().end() ||
        std::string(it->second.data(), it->second.size()) !=
            "Bearer admin-token") {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                          "admin token is invalid");
    }
    if (req->name() == "w1") ++drained_;
    return grpc::Status::OK;
  }
  std::atomic<int> drained_{0};
};

struct CtlResult {
  int exit = -1;
  std::string out;
  std::string err;
};

class CtlLeaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    builder.RegisterService(&dashboard_);
    builder.RegisterService(&admin_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    leader_ = absl::StrCat("127.0.0.1:", port);
    auto standby = FakeStandby::Start(leader_);
    ASSERT_TRUE(standby.ok()) << standby.status();
    standby_ = *std::move(standby);
    dashboard_.leader_ = leader_;
    dashboard_.standbys_ = {standby_->address()};
  }

  void TearDown() override { server_->Shutdown(); }

  // Runs zshardctl ARGS... .
  CtlResult Run(const std::vector<std::string>& args) {
    const char* bin_dir = std::getenv("ZSHARD_BIN_DIR");
    Subprocess::Options options;
    options.argv = {std::string(bin_dir ? bin_dir : "build/bin") +
                    "/zshardctl"};
    options.argv.insert(options.argv.end(), args.begin(), args.end());
    options.stdout_path = dir_.File("out");
    options.stderr_path = dir_.File("err");
    CtlResult r;
    auto child = Subprocess::Start(options);
    if (!child.ok()) return r;
    r.exit = (*child)->Wait(20000).value_or(-1);
    r.out = ReadFile(options.stdout_path).value_or("");
    r.err = ReadFile(options.stderr_path).value_or("");
    return r;
  }

  // Exit status `exit`, nothing on stdout and `message` as the one line on
  // stderr.
  static void ExpectOneLineError(const CtlResult& r, int exit,
                                 const std::string& message) {
    EXPECT_EQ(r.exit, exit) << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err, message + "\n");
  }

  std::string List() const {
    return absl::StrCat(standby_->address(), ",", leader_);
  }

  TempDir dir_;
  LeaderDashboard dashboard_;
  LeaderAdmin admin_;
  std::unique_ptr<grpc::Server> server_;
  std::string leader_;
  std::unique_ptr<FakeStandby> standby_;
};

TEST_F(CtlLeaderTest, StatusThroughAStandbyListsTheLeaderAndStandbys) {
  CtlResult json = Run({"--coordinator", List(), "status", "--output", "json"});
  ASSERT_EQ(json.exit, 0) << json.err;
  nlohmann::json j = nlohmann::json::parse(json.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << json.out;
  EXPECT_EQ(j["job"], "ha-demo");
  EXPECT_EQ(j["leader"], leader_);
  EXPECT_EQ(j["standbys"], nlohmann::json::array({standby_->address()}));
  EXPECT_EQ(j["members"].size(), 1u);
  EXPECT_EQ(standby_->calls(), 1);
  EXPECT_EQ(standby_->last_method(),
            "/zshard.v1.DashboardService/GetClusterStatus");
  EXPECT_EQ(dashboard_.calls_.load(), 1);

  CtlResult table = Run({"--coordinator", List(), "status"});
  ASSERT_EQ(table.exit, 0) << table.err;
  EXPECT_THAT(table.out,
              HasSubstr(absl::StrCat("\nleader ", leader_, "  standbys ",
                                     standby_->address(), "\n")));
  // One coordinator that does not name a leader: "-" and null.
  dashboard_.leader_.clear();
  dashboard_.standbys_.clear();
  table = Run({"--coordinator", leader_, "status"});
  ASSERT_EQ(table.exit, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("\nleader -  standbys -\n"));
  json = Run({"--coordinator", leader_, "status", "--output", "json"});
  ASSERT_EQ(json.exit, 0) << json.err;
  j = nlohmann::json::parse(json.out, nullptr, false);
  EXPECT_TRUE(j["leader"].is_null()) << json.out;
  EXPECT_EQ(j["standbys"], nlohmann::json::array());
}

TEST_F(CtlLeaderTest, EveryOnlineCommandFollowsTheStandby) {
  // The in-test leader implements GetClusterStatus only: the others answer
  // UNIMPLEMENTED, which reaches zshardctl only from the leader (exit 1;
  // an unreachable leader would be 3).
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"events"}, "ListEvents"},
      {{"explain"}, "Explain"},
      {{"ledger"}, "GetLedger"},
      {{"plan"}, "GetPlan"},
      {{"checkpoint", "list"}, "ListCheckpoints"},
      {{"reshards"}, "GetReshardHistory"},
      {{"top", "--once"}, "GetClusterStatus"}};
  for (const auto& [command, method] : cases) {
    std::vector<std::string> args = {"--coordinator", List()};
    args.insert(args.end(), command.begin(), command.end());
    const int calls = standby_->calls();
    CtlResult r = Run(args);
    EXPECT_EQ(r.exit, 1) << command[0] << ": " << r.err;
    EXPECT_EQ(r.out, "") << command[0];
    EXPECT_THAT(r.err, HasSubstr(absl::StrCat("zshardctl ", command[0],
                                              ": coordinator ", List(), ": ")))
        << command[0];
    EXPECT_EQ(standby_->calls(), calls + 1) << command[0];
    EXPECT_EQ(standby_->last_method(), "/zshard.v1.DashboardService/" + method)
        << command[0];
  }
}

TEST_F(CtlLeaderTest, DrainCarriesTheTokenToTheLeader) {
  const std::string token_file = dir_.File("token");
  ASSERT_TRUE(WriteFileAtomic(token_file, "admin-token\n").ok());
  CtlResult r = Run({"--coordinator", List(), "--token-file", token_file,
                     "drain", "w1", "--output", "json"});
  ASSERT_EQ(r.exit, 0) << r.err;
  EXPECT_EQ(admin_.drained_.load(), 1);
  EXPECT_EQ(standby_->last_method(), "/zshard.v1.AdminService/DrainWorker");
}

TEST_F(CtlLeaderTest, NoLeaderOrABadListIsOneLine) {
  auto unsure = FakeStandby::Start("");
  ASSERT_TRUE(unsure.ok()) << unsure.status();
  const int dead = PickFreePort();
  ASSERT_NE(dead, 0);
  const std::string list =
      absl::StrCat((*unsure)->address(), ",127.0.0.1:", dead);
  ExpectOneLineError(
      Run({"--coordinator", list, "status", "--timeout-ms", "2000"}), 3,
      absl::StrCat("zshardctl status: coordinator ", list,
                   " unreachable: standby coordinator: no leader yet"));
  ExpectOneLineError(
      Run({"--coordinator", list, "events", "--timeout-ms", "2000"}), 3,
      absl::StrCat("zshardctl events: coordinator ", list,
                   ": standby coordinator: no leader yet"));
  ExpectOneLineError(Run({"--coordinator", "a:1,,b:2", "status"}), 2,
                     "zshardctl status: coordinator list 'a:1,,b:2' has an "
                     "empty entry");
  ExpectOneLineError(Run({"--coordinator", "a:1,b", "reshards"}), 2,
                     "zshardctl reshards: coordinator address 'b' has no port "
                     "(HOST:PORT)");
}

// A real coordinator (default options) of an idle job named `name`.
absl::StatusOr<std::unique_ptr<server::Coordinator>> StartIdleCoordinator(
    const std::string& name) {
  auto spec = job::ParseJobSpec(absl::StrCat(R"({"name": ")", name, R"(",
    "model": {"preset": "gpt2-small"},
    "world": {"instances": 1, "min": 1, "max": 2},
    "workload": {"kind": "idle", "steps": 0}})"));
  if (!spec.ok()) return spec.status();
  return server::Coordinator::Start(*std::move(spec),
                                    server::CoordinatorOptions());
}

// During a failover's election every coordinator answers "no leader yet";
// zshardctl asks again until one leads, within --timeout-ms.
TEST_F(CtlLeaderTest, StatusWaitsOutAnElection) {
  auto coordinator = StartIdleCoordinator("ctl-election-test");
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  auto a = FakeStandby::Start("");
  auto b = FakeStandby::Start("");
  ASSERT_TRUE(a.ok() && b.ok());
  std::thread elected([&] {
    absl::SleepFor(absl::Milliseconds(700));
    (*b)->set_leader((*coordinator)->address());
  });
  CtlResult r =
      Run({"--coordinator", absl::StrCat((*a)->address(), ",", (*b)->address()),
           "status", "--output", "json", "--timeout-ms", "20000"});
  elected.join();
  ASSERT_EQ(r.exit, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out;
  EXPECT_EQ(j["job"], "ctl-election-test");
  EXPECT_GE((*a)->calls() + (*b)->calls(), 3);  // asked again
}

TEST_F(CtlLeaderTest, StatusReachesTheRealCoordinatorThroughAStandby) {
  auto coordinator = StartIdleCoordinator("ctl-leader-test");
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  const std::string address = (*coordinator)->address();
  auto standby = FakeStandby::Start(address);
  ASSERT_TRUE(standby.ok()) << standby.status();
  CtlResult r =
      Run({"--coordinator", absl::StrCat((*standby)->address(), ",", address),
           "status", "--output", "json"});
  ASSERT_EQ(r.exit, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out;
  EXPECT_EQ(j["job"], "ctl-leader-test");
  EXPECT_EQ((*standby)->calls(), 1);
  // One coordinator on SQLite reports itself as the leader and no
  // standbys (DashboardService's contract).
  EXPECT_EQ(j["leader"], address);
  EXPECT_EQ(j["standbys"], nlohmann::json::array());
}

}  // namespace
}  // namespace zshard::testing
