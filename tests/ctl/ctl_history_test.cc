// zshardctl's drain, checkpoint list and reshards against a real gRPC
// server on 127.0.0.1 holding small in-test DashboardService and
// AdminService implementations: the tables, the JSON arrays, the admin
// token (flag, environment, refusal) and the exit statuses.
#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/file_io.h"
#include "gmock/gmock.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/subprocess.h"
#include "tests/testing/temp_dir.h"
#include "zshard/v1/admin_service.grpc.pb.h"
#include "zshard/v1/dashboard_service.grpc.pb.h"

namespace zshard::testing {
namespace {

using ::testing::HasSubstr;

constexpr char kToken[] = "s3cret-admin-token";

// Two checkpoints, two re-shards, and one member whose state --wait polls.
class FakeDashboard final : public v1::DashboardService::Service {
 public:
  grpc::Status ListCheckpoints(grpc::ServerContext*,
                               const v1::ListCheckpointsRequest*,
                               v1::ListCheckpointsResponse* resp) override {
    if (empty_) return grpc::Status::OK;
    for (int64_t step : {10, 20}) {
      v1::CheckpointManifest* c = resp->add_checkpoints();
      c->set_job("demo");
      c->set_step(step);
      c->set_adam_step(step - 1);
      c->set_epoch(step / 10);
      c->set_world(4);
      c->set_instances(2);
      c->set_dir("/ckpt/step-" + std::to_string(step));
      c->set_committed_ms(1795000000000 + step * 1000);
      c->set_bytes(3 * 1000 * 1000 + step);
      resp->add_file_count(2);
    }
    if (incomplete_) {
      v1::CheckpointAttempt* a = resp->add_incomplete();
      a->set_step(30);
      a->set_dir("/ckpt/step-30");
      a->set_files_reported(1);
      a->set_files_expected(2);
      a->add_failures("rank 1: cannot create directory: Permission denied");
    }
    return grpc::Status::OK;
  }

  grpc::Status GetReshardHistory(grpc::ServerContext*,
                                 const v1::GetReshardHistoryRequest* req,
                                 v1::GetReshardHistoryResponse* resp) override {
    limit_ = req->limit();
    if (empty_) return grpc::Status::OK;
    v1::Reshard* r = resp->add_reshards();
    r->set_epoch(3);
    r->set_base_epoch(2);
    r->set_reason("member w1's lease expired; spare w4 takes rank 1");
    r->set_world_before(4);
    r->set_world_after(4);
    r->set_instances(2);
    r->mutable_summary()->set_moves(6);
    r->mutable_summary()->set_bytes_moved(1234560);
    r->mutable_summary()->set_lower_bound_bytes(1234560);
    r->set_proposed_ms(1795000000000);
    r->set_duration_ms(1500);
    r->set_outcome("stable");
    v1::Reshard* b = resp->add_reshards();
    b->set_epoch(5);
    b->set_base_epoch(3);
    b->set_reason("lost ranges; rolling back to checkpoint step 20");
    b->set_world_before(4);
    b->set_world_after(3);
    b->set_instances(1);
    b->mutable_summary()->set_moves(9);
    b->mutable_summary()->set_bytes_moved(900);
    b->mutable_summary()->set_lower_bound_bytes(600);
    b->mutable_summary()->set_bytes_from_checkpoint(900);
    b->set_restored_step(20);
    b->set_proposed_ms(1795000100000);
    b->set_outcome("in progress");
    return grpc::Status::OK;
  }

  // w1 is DRAINING for the first two polls, then LEFT.
  grpc::Status GetClusterStatus(grpc::ServerContext*,
                                const v1::GetClusterStatusRequest*,
                                v1::GetClusterStatusResponse* resp) override {
    resp->set_job("demo");
    v1::MemberStatus* m = resp->add_members();
    m->set_name("w1");
    m->set_rank(1);
    m->set_state(++polls_ <= 2 ? v1::MEMBER_STATE_DRAINING
                               : v1::MEMBER_STATE_LEFT);
    return grpc::Status::OK;
  }

  std::atomic<bool> empty_{false};
  std::atomic<bool> incomplete_{false};
  std::atomic<int> limit_{-1};
  std::atomic<int> polls_{0};
};

// Drains a live name when the call carries the token.
class FakeAdmin final : public v1::AdminService::Service {
 public:
  grpc::Status DrainWorker(grpc::ServerContext* ctx,
                           const v1::DrainWorkerRequest* req,
                           v1::DrainWorkerResponse*) override {
    auto it = ctx->client_metadata().find("authorization");
    if (it == ctx->client_metadata().end() ||
        std::string(it->second.data(), it->second.size()) !=
            std::string("Bearer ") + kToken) {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                          "admin token is invalid");
    }
    if (req->name() != "w1") {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          "worker '" + req->name() + "' is not a live member");
    }
    absl::MutexLock lock(&mu_);
    drained_.push_back(req->name());
    return grpc::Status::OK;
  }

  std::vector<std::string> drained() {
    absl::MutexLock lock(&mu_);
    return drained_;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> drained_ ABSL_GUARDED_BY(mu_);
};

struct CtlResult {
  int exit = -1;
  std::string out;
  std::string err;
};

class CtlHistoryTest : public ::testing::Test {
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
    address_ = "127.0.0.1:" + std::to_string(port);
    token_file_ = dir_.File("admin.token");
    ASSERT_TRUE(WriteFileAtomic(token_file_, std::string(kToken) + "\n").ok());
  }

  void TearDown() override { server_->Shutdown(); }

  // Runs zshardctl --coordinator ADDRESS ARGS... with `env` added.
  CtlResult Run(const std::vector<std::string>& args,
                const std::vector<std::string>& env = {},
                bool with_address = true) {
    const char* bin_dir = std::getenv("ZSHARD_BIN_DIR");
    Subprocess::Options options;
    options.argv = {std::string(bin_dir ? bin_dir : "build/bin") +
                    "/zshardctl"};
    if (with_address) {
      options.argv.insert(options.argv.end(), {"--coordinator", address_});
    }
    options.argv.insert(options.argv.end(), args.begin(), args.end());
    options.stdout_path = dir_.File("out");
    options.stderr_path = dir_.File("err");
    options.env = env;
    CtlResult r;
    auto child = Subprocess::Start(options);
    if (!child.ok()) return r;
    r.exit = (*child)->Wait(20000).value_or(-1);
    r.out = ReadFile(options.stdout_path).value_or("");
    r.err = ReadFile(options.stderr_path).value_or("");
    return r;
  }

  // Exit status 2 or 3, nothing on stdout and one line on stderr.
  void ExpectOneLineError(const CtlResult& r, int exit,
                          const std::string& message) {
    EXPECT_EQ(r.exit, exit) << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_THAT(r.err, HasSubstr(message));
    ASSERT_FALSE(r.err.empty());
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
  }

  TempDir dir_;
  FakeDashboard dashboard_;
  FakeAdmin admin_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  std::string token_file_;
};

TEST_F(CtlHistoryTest, CheckpointListJsonAndTable) {
  CtlResult r = Run({"checkpoint", "list", "--output", "json"});
  ASSERT_EQ(r.exit, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_array()) << r.out;
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["step"], 10);  // oldest first
  EXPECT_EQ(j[1]["step"], 20);
  EXPECT_EQ(j[1]["adam_step"], 19);
  EXPECT_EQ(j[1]["files"], 2);
  EXPECT_EQ(j[1]["bytes"], 3000020);
  EXPECT_EQ(j[1]["dir"], "/ckpt/step-20");
  EXPECT_EQ(j[1]["world"], 4);
  EXPECT_EQ(j[1]["instances"], 2);
  EXPECT_EQ(j[0]["time"], "2026-11-18T11:06:50.000Z");

  CtlResult table = Run({"checkpoint", "list"});
  ASSERT_EQ(table.exit, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("STEP"));
  EXPECT_THAT(table.out, HasSubstr("3,000,020"));
  EXPECT_THAT(table.out, HasSubstr("/ckpt/step-20\n"));
  EXPECT_THAT(table.out, HasSubstr("2026-11-18T11:07:00.000Z"));

  // An attempt without a manifest is listed after the committed ones,
  // marked, with its reason.
  dashboard_.incomplete_ = true;
  CtlResult marked = Run({"checkpoint", "list"});
  ASSERT_EQ(marked.exit, 0) << marked.err;
  EXPECT_THAT(marked.out, HasSubstr("INCOMPLETE (failed)"));
  EXPECT_THAT(marked.out, HasSubstr("1/2"));
  EXPECT_THAT(marked.out, HasSubstr("rank 1: cannot create directory"));
  nlohmann::json mj = nlohmann::json::parse(
      Run({"checkpoint", "list", "--output", "json"}).out, nullptr, false);
  ASSERT_EQ(mj.size(), 3u);
  EXPECT_EQ(mj[1]["complete"], true);
  EXPECT_EQ(mj[2]["complete"], false);
  EXPECT_EQ(mj[2]["step"], 30);
  EXPECT_EQ(mj[2]["failures"][0],
            "rank 1: cannot create directory: Permission denied");
  dashboard_.incomplete_ = false;

  dashboard_.empty_ = true;
  CtlResult none = Run({"checkpoint", "list"});
  EXPECT_EQ(none.out, "no committed checkpoints yet\n");
  EXPECT_EQ(Run({"checkpoint", "list", "--output=json"}).out, "[]\n");
}

TEST_F(CtlHistoryTest, ReshardsJsonAndTable) {
  CtlResult r = Run({"reshards", "--output", "json", "--limit", "7"});
  ASSERT_EQ(r.exit, 0) << r.err;
  EXPECT_EQ(dashboard_.limit_, 7);
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_array()) << r.out;
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["epoch"], 3);
  EXPECT_EQ(j[0]["base_epoch"], 2);
  EXPECT_EQ(j[0]["world_before"], 4);
  EXPECT_EQ(j[0]["bytes_moved"], j[0]["lower_bound_bytes"]);
  EXPECT_EQ(j[0]["duration_ms"], 1500);
  EXPECT_EQ(j[0]["outcome"], "stable");
  EXPECT_TRUE(j[0]["restored_step"].is_null());
  EXPECT_THAT(j[0]["reason"].get<std::string>(), HasSubstr("spare w4"));
  EXPECT_EQ(j[1]["restored_step"], 20);
  EXPECT_EQ(j[1]["bytes_from_checkpoint"], 900);
  EXPECT_EQ(j[1]["world_after"], 3);

  CtlResult table = Run({"reshards"});
  ASSERT_EQ(table.exit, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("LOWER_BOUND"));
  EXPECT_THAT(table.out, HasSubstr("1,234,560"));
  EXPECT_THAT(table.out, HasSubstr("4->3"));
  EXPECT_THAT(table.out, HasSubstr("1.50"));  // moved over the bound
  EXPECT_THAT(table.out, HasSubstr("step 20"));
  EXPECT_THAT(table.out, HasSubstr("1.50s"));
  EXPECT_THAT(table.out, HasSubstr("stable"));
  EXPECT_THAT(table.out, HasSubstr("in progress  lost ranges; rolling back"));
  dashboard_.empty_ = true;
  EXPECT_EQ(Run({"reshards"}).out, "no re-shards yet\n");
}

TEST_F(CtlHistoryTest, DrainSendsTheAdminToken) {
  ExpectOneLineError(Run({"drain", "w1"}), 3,
                     "zshardctl drain: coordinator " + address_ +
                         " refused the request: admin token is invalid");
  const std::string wrong = dir_.File("wrong.token");
  ASSERT_TRUE(WriteFileAtomic(wrong, "nope").ok());
  ExpectOneLineError(Run({"drain", "w1", "--token-file", wrong}), 3,
                     "refused the request");
  EXPECT_TRUE(admin_.drained().empty());

  // The global flag.
  CtlResult r = Run({"--token-file", token_file_, "drain", "w1"});
  ASSERT_EQ(r.exit, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("worker w1 is draining"));
  // The environment, with JSON output.
  CtlResult env = Run({"drain", "w1", "--output", "json"},
                      {"ZSHARD_ADMIN_TOKEN_FILE=" + token_file_});
  ASSERT_EQ(env.exit, 0) << env.err;
  EXPECT_EQ(nlohmann::json::parse(env.out),
            nlohmann::json({{"worker", "w1"}, {"state", "DRAINING"}}));
  EXPECT_EQ(admin_.drained(), (std::vector<std::string>{"w1", "w1"}));
}

TEST_F(CtlHistoryTest, DrainWaitFollowsTheMemberUntilItLeft) {
  CtlResult r = Run({"--token-file", token_file_, "drain", "w1", "--wait",
                     "--output", "json"});
  ASSERT_EQ(r.exit, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  EXPECT_EQ(j["state"], "LEFT") << r.out;
  EXPECT_GE(j["waited_ms"].get<int64_t>(), 0);
  EXPECT_EQ(dashboard_.polls_, 3);
  EXPECT_EQ(r.err, "");  // no progress within the first second
}

TEST_F(CtlHistoryTest, BadInputAndUnreachableExitWithOneLine) {
  const std::string token = "--token-file=" + token_file_;
  ExpectOneLineError(Run({token, "drain", "w9"}), 2,
                     "worker 'w9' is not a live member");
  ExpectOneLineError(Run({"drain"}), 2, "the worker's NAME is missing");
  ExpectOneLineError(Run({"drain", "--wait"}), 2, "NAME is missing");
  ExpectOneLineError(Run({"drain", "w1", "--token-file", dir_.File("none")}), 2,
                     "token file");
  ExpectOneLineError(Run({"checkpoint"}), 2, "a subcommand is missing");
  ExpectOneLineError(Run({"checkpoint", "lst"}), 2, "unknown subcommand 'lst'");
  ExpectOneLineError(Run({"reshards", "--limit", "0"}), 2,
                     "--limit must be >= 1");
  ExpectOneLineError(Run({"reshards", "--output", "yaml"}), 2,
                     "--output must be table or json");
  ExpectOneLineError(Run({"reshards"}, {}, /*with_address=*/false), 2,
                     "--coordinator HOST:PORT is required");
  ExpectOneLineError(Run({"--coordinator", "127.0.0.1:1", "checkpoint", "list",
                          "--timeout-ms", "2000"},
                         {}, /*with_address=*/false),
                     3, "coordinator 127.0.0.1:1 is unreachable");
}

}  // namespace
}  // namespace zshard::testing
