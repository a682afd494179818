// JsonGateway over an in-process gRPC server with small fake services: the
// routes come from the descriptors (unary methods only), JSON goes in and
// out in protobuf's canonical mapping, gRPC errors become Connect's error
// bodies with their HTTP statuses, and the Authorization header reaches
// the service as metadata.
#include "server/web/json_gateway.h"

#include <httplib.h>

#include <algorithm>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "google/protobuf/descriptor.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "grpcpp/support/channel_arguments.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/web/web_routes.h"
#include "zshard/v1/admin_service.grpc.pb.h"
#include "zshard/v1/dashboard_service.grpc.pb.h"

namespace zshard::server::web {
namespace {

using nlohmann::json;

class FakeDashboard final : public v1::DashboardService::Service {
  grpc::Status GetPlan(grpc::ServerContext*, const v1::GetPlanRequest* req,
                       v1::GetPlanResponse* resp) override {
    if (req->param() == "missing") {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          "param 'missing' is not in the model");
    }
    resp->set_epoch(7);  // int64: a string in JSON
    resp->set_world(req->has_rank() ? req->rank() : 4);
    v1::PlanPiece* p = resp->add_pieces();
    p->set_param(req->param());
    p->set_offset_in_bucket(12);
    return grpc::Status::OK;
  }
};

class FakeAdmin final : public v1::AdminService::Service {
  grpc::Status DrainWorker(grpc::ServerContext* ctx,
                           const v1::DrainWorkerRequest* req,
                           v1::DrainWorkerResponse*) override {
    auto it = ctx->client_metadata().find("authorization");
    if (it == ctx->client_metadata().end() ||
        std::string(it->second.data(), it->second.size()) != "Bearer good") {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                          "admin token is invalid");
    }
    if (req->name().empty()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "name is empty");
    }
    return grpc::Status::OK;
  }
};

const google::protobuf::ServiceDescriptor* Service(const char* name) {
  return google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
      name);
}

class JsonGatewayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.RegisterService(&dashboard_);
    builder.RegisterService(&admin_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    channel_ = server_->InProcessChannel(grpc::ChannelArguments());
    gateway_ = std::make_unique<JsonGateway>(
        [this] { return channel_; },
        std::vector<const google::protobuf::ServiceDescriptor*>{
            Service(v1::DashboardService::service_full_name()),
            Service(v1::AdminService::service_full_name())},
        5000);
  }
  void TearDown() override { server_->Shutdown(); }

  FakeDashboard dashboard_;
  FakeAdmin admin_;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<JsonGateway> gateway_;
};

TEST_F(JsonGatewayTest, RoutesAreTheUnaryMethodsOfTheDescriptors) {
  const std::vector<std::string> paths = gateway_->Paths();
  const auto has = [&](const std::string& p) {
    return std::find(paths.begin(), paths.end(), p) != paths.end();
  };
  EXPECT_TRUE(has("/zshard.v1.DashboardService/GetPlan"));
  EXPECT_TRUE(has("/zshard.v1.DashboardService/GetReshardHistory"));
  EXPECT_TRUE(has("/zshard.v1.AdminService/DrainWorker"));
  EXPECT_FALSE(has("/zshard.v1.DashboardService/WatchEvents"));  // a stream
  // Every unary method of both services and nothing else.
  int unary = 0;
  for (const char* name : {v1::DashboardService::service_full_name(),
                           v1::AdminService::service_full_name()}) {
    const auto* s = Service(name);
    for (int i = 0; i < s->method_count(); ++i) {
      if (!s->method(i)->server_streaming()) ++unary;
    }
  }
  EXPECT_EQ(static_cast<int>(paths.size()), unary);
}

TEST_F(JsonGatewayTest, JsonInCanonicalJsonOut) {
  HttpReply r =
      gateway_->Call("/zshard.v1.DashboardService/GetPlan", "application/json",
                     R"({"rank": 2, "param": "fc1.weight"})", "");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.content_type, "application/json");
  EXPECT_EQ(
      json::parse(r.body),
      json::parse(R"({"epoch": "7", "world": 2, "pieces": [)"
                  R"({"param": "fc1.weight", "offsetInBucket": "12"}]})"));
  // An empty body is the empty request; proto field names are accepted too.
  EXPECT_EQ(gateway_
                ->Call("/zshard.v1.DashboardService/GetPlan",
                       "application/json; charset=utf-8", "", "")
                .status,
            200);
  EXPECT_EQ(gateway_
                ->Call("/zshard.v1.DashboardService/GetPlan",
                       "application/json", R"({"page_size": 3})", "")
                .status,
            200);
}

TEST_F(JsonGatewayTest, ErrorsAreConnectErrorBodies) {
  struct Case {
    std::string path, type, body;
    int status;
    std::string code, message;
  };
  const std::string plan = "/zshard.v1.DashboardService/GetPlan";
  for (const Case& c : std::vector<Case>{
           {plan, "application/json", R"({"param": "missing"})", 404,
            "not_found", "param 'missing' is not in the model"},
           {plan, "application/json", R"({"noSuchField": 1})", 400,
            "invalid_argument", ""},
           {plan, "application/json", "{not json", 400, "invalid_argument", ""},
           {plan, "text/plain", "{}", 415, "invalid_argument",
            "content type 'text/plain' is not application/json"},
           {"/zshard.v1.DashboardService/WatchEvents", "application/json", "{}",
            404, "not_found", ""},
       }) {
    HttpReply r = gateway_->Call(c.path, c.type, c.body, "");
    EXPECT_EQ(r.status, c.status) << c.path << " " << c.body;
    json body = json::parse(r.body, nullptr, false);
    ASSERT_TRUE(body.is_object()) << r.body;
    EXPECT_EQ(body.value("code", ""), c.code) << r.body;
    if (!c.message.empty()) {
      EXPECT_EQ(body.value("message", ""), c.message);
    }
  }
}

TEST_F(JsonGatewayTest, AuthorizationReachesTheServiceAsMetadata) {
  const std::string drain = "/zshard.v1.AdminService/DrainWorker";
  HttpReply none =
      gateway_->Call(drain, "application/json", R"({"name": "w1"})", "");
  EXPECT_EQ(none.status, 401);
  HttpReply wrong = gateway_->Call(drain, "application/json",
                                   R"({"name": "w1"})", "Bearer bad");
  EXPECT_EQ(wrong.status, 401);
  EXPECT_EQ(json::parse(wrong.body).value("message", ""),
            "admin token is invalid");
  HttpReply right = gateway_->Call(drain, "application/json",
                                   R"({"name": "w1"})", "Bearer good");
  EXPECT_EQ(right.status, 200);
  EXPECT_EQ(right.body, "{}");
}

TEST_F(JsonGatewayTest, NoServerIsUnavailable) {
  JsonGateway down([] { return std::shared_ptr<grpc::Channel>(); },
                   {Service(v1::DashboardService::service_full_name())});
  HttpReply r = down.Call("/zshard.v1.DashboardService/GetPlan",
                          "application/json", "{}", "");
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(json::parse(r.body).value("code", ""), "unavailable");
}

TEST(ConnectCodes, FollowTheProtocolTable) {
  EXPECT_EQ(ConnectCode(absl::StatusCode::kFailedPrecondition),
            "failed_precondition");
  EXPECT_EQ(ConnectHttpStatus(absl::StatusCode::kFailedPrecondition), 400);
  EXPECT_EQ(ConnectHttpStatus(absl::StatusCode::kUnavailable), 503);
  EXPECT_EQ(ConnectHttpStatus(absl::StatusCode::kUnauthenticated), 401);
  EXPECT_EQ(ConnectHttpStatus(absl::StatusCode::kPermissionDenied), 403);
  EXPECT_EQ(ConnectHttpStatus(absl::StatusCode::kDeadlineExceeded), 504);
  EXPECT_EQ(ConnectHttpStatus(absl::StatusCode::kAborted), 409);
  EXPECT_EQ(ConnectCode(absl::StatusCode::kCancelled), "canceled");
  EXPECT_EQ(ConnectHttpStatus(absl::StatusCode::kInternal), 500);
}

}  // namespace
}  // namespace zshard::server::web

namespace zshard::server::web {
namespace {

// While gRPC runs TLS the plain-HTTP port serves no admin call: the token
// would travel in clear. The dashboard's own calls still work.
TEST_F(JsonGatewayTest, AdminRoutesAreOffWhenWebOptionsSaySo) {
  WebOptions options;
  options.admin = false;
  WebRoutes routes([this] { return channel_; }, options);
  httplib::Server http;
  routes.Install(&http);
  const int port = http.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  std::thread serving([&] { http.listen_after_bind(); });
  httplib::Client client("127.0.0.1", port);
  httplib::Headers auth = {{"Authorization", "Bearer good"}};
  auto drain = client.Post("/zshard.v1.AdminService/DrainWorker", auth,
                           R"({"name": "w1"})", "application/json");
  auto plan = client.Post("/zshard.v1.DashboardService/GetPlan", "{}",
                          "application/json");
  routes.Stop();
  http.stop();
  serving.join();
  ASSERT_TRUE(drain && plan);
  EXPECT_EQ(plan->status, 200) << plan->body;
  EXPECT_NE(drain->status, 200);
  const json body = json::parse(drain->body, nullptr, false);
  ASSERT_FALSE(body.is_discarded()) << drain->body;
  EXPECT_EQ(body.value("code", ""), "failed_precondition") << drain->body;
  EXPECT_NE(body.value("message", "").find("use zshardctl"), std::string::npos)
      << drain->body;
}

}  // namespace
}  // namespace zshard::server::web
