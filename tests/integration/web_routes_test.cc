// The dashboard's HTTP routes (server/web/) against real processes on
// 127.0.0.1: a coordinator with its HTTP port and five workers (I = 2,
// world 4, one spare) running the regression workload. Every unary
// DashboardService method answered as Connect JSON equals the gRPC answer
// (both parsed with protobuf and compared with MessageDifferencer); errors
// come back as Connect's error body with its HTTP status; the drain route
// goes through AdminService's token check; the SSE streams carry the event
// log and the plan.
#include <httplib.h>

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/integration/process_cluster.h"
#include "tests/testing/free_port.h"
#include "zshard/v1/admin_service.grpc.pb.h"
#include "zshard/v1/dashboard_service.grpc.pb.h"

namespace zshard::testing {
namespace {

namespace pb = google::protobuf;
using nlohmann::json;

constexpr int kWorkers = 5;
constexpr int kWorld = 4;
constexpr char kToken[] = "s3cret-token";

json JobSpec() {
  return {{"name", "web"},
          {"model", RegressionMlpModel()},
          {"layout", {{"bucket_size", 512}}},
          {"optimizer", {{"lr", 1e-2}}},
          {"world", {{"instances", 2}, {"min", 2}, {"max", kWorld}}},
          {"lease_timeout_ms", 2500},
          {"heartbeat_interval_ms", 100},
          {"checkpoint", {{"every_steps", 20}}},
          {"workload",
           {{"kind", "regression"},
            {"steps", 1000000},
            {"global_batch", 32},
            {"step_delay_ms", 20}}}};
}

const pb::ServiceDescriptor* Service(const char* name) {
  return pb::DescriptorPool::generated_pool()->FindServiceByName(name);
}

std::unique_ptr<pb::Message> New(const pb::Descriptor* type) {
  return std::unique_ptr<pb::Message>(
      pb::MessageFactory::generated_factory()->GetPrototype(type)->New());
}

class WebRoutesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    http_port_ = PickFreePort();
    const std::string token_file = cluster_.dir().File("admin.token");
    FILE* f = std::fopen(token_file.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(kToken, f);
    std::fclose(f);
    TestJob job;
    job.spec = JobSpec();
    job.spec.value()["checkpoint"]["dir"] = cluster_.dir().File("ckpt");
    ASSERT_TRUE(
        cluster_
            .StartCoordinator(
                job, {"--http-listen", absl::StrCat("127.0.0.1:", http_port_),
                      "--admin-token-file", token_file})
            .ok());
    for (int i = 0; i < kWorkers; ++i) {
      const std::string name = absl::StrCat("w", i);
      ASSERT_TRUE(cluster_.StartWorker(name).ok());
      ASSERT_TRUE(
          cluster_
              .WaitForStatus(
                  [&](const json& s) { return !FindMember(s, name).is_null(); },
                  20000)
              .ok());
    }
    auto stable = cluster_.WaitForStatus(
        [](const json& s) { return IsStableWorld(s, kWorld, 1); }, 60000);
    ASSERT_TRUE(stable.ok()) << stable.status();
    channel_ = grpc::CreateChannel(cluster_.address(),
                                   grpc::InsecureChannelCredentials());
    http_ = std::make_unique<httplib::Client>("127.0.0.1", http_port_);
    http_->set_read_timeout(10, 0);
  }

  // The gRPC answer to `path` for `request`, into `response`.
  grpc::Status Grpc(const std::string& path, const pb::Message& request,
                    pb::Message* response) {
    grpc::GenericStub stub(channel_);
    std::string wire = request.SerializeAsString();
    grpc::Slice slice(wire);
    grpc::ByteBuffer req(&slice, 1), resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(5));
    absl::Notification done;
    grpc::Status status;
    stub.UnaryCall(&ctx, path, grpc::StubOptions(), &req, &resp,
                   [&](grpc::Status s) {
                     status = std::move(s);
                     done.Notify();
                   });
    done.WaitForNotification();
    if (!status.ok()) return status;
    std::vector<grpc::Slice> slices;
    EXPECT_TRUE(resp.Dump(&slices).ok());
    std::string bytes;
    for (const grpc::Slice& s : slices) {
      bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
    EXPECT_TRUE(response->ParseFromString(bytes));
    return status;
  }

  httplib::Result Post(const std::string& path, const std::string& body,
                       const std::string& token = "",
                       const std::string& type = "application/json") {
    httplib::Headers headers;
    if (!token.empty()) headers.emplace("Authorization", "Bearer " + token);
    return http_->Post(path.c_str(), headers, body, type.c_str());
  }

  ProcessCluster cluster_;
  int http_port_ = 0;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<httplib::Client> http_;
};

// The requests each method is asked with (JSON); every unary method of the
// service must have at least one, so a method added later fails here until
// the test covers it.
std::map<std::string, std::vector<std::string>> Requests(
    const std::string& param) {
  return {
      {"GetClusterStatus", {"{}"}},
      {"GetPlan",
       {"{}", R"({"rank": 1})", R"({"bucket": 0, "buffer": 0})",
        absl::StrCat(R"({"param": ")", param, R"(", "paramEnd": "40"})"),
        R"({"bucket": 0, "pageSize": 2})", R"({"moves": true})"}},
      {"ListEvents", {"{}", R"({"pageSize": 5, "afterSeq": "3"})"}},
      {"GetTelemetry", {"{}", R"({"samples": 4})", R"({"rank": 2})"}},
      {"GetLedger", {"{}"}},
      {"Explain", {"{}"}},
      {"ListCheckpoints", {"{}"}},
      {"GetReshardHistory", {"{}", R"({"limit": 1})"}},
  };
}

TEST_F(WebRoutesTest, EveryUnaryDashboardMethodAnswersAsGrpcDoes) {
  const pb::ServiceDescriptor* service =
      Service(v1::DashboardService::service_full_name());
  ASSERT_NE(service, nullptr);
  v1::GetPlanResponse some;
  v1::GetPlanRequest by_bucket;
  by_bucket.set_bucket(0);
  ASSERT_TRUE(
      Grpc("/zshard.v1.DashboardService/GetPlan", by_bucket, &some).ok());
  ASSERT_GT(some.pieces_size(), 0);
  const auto requests = Requests(some.pieces(0).param());
  int unary = 0;
  for (int i = 0; i < service->method_count(); ++i) {
    const pb::MethodDescriptor* m = service->method(i);
    const std::string path =
        absl::StrCat("/", service->full_name(), "/", m->name());
    if (m->server_streaming() || m->client_streaming()) {
      // Streams are not Connect unary routes (the SSE routes carry them).
      auto r = Post(path, "{}");
      ASSERT_TRUE(r);
      EXPECT_EQ(r->status, 404) << path;
      continue;
    }
    ++unary;
    auto it = requests.find(m->name());
    ASSERT_NE(it, requests.end()) << "no request for " << m->name();
    for (const std::string& request_json : it->second) {
      std::unique_ptr<pb::Message> request = New(m->input_type());
      ASSERT_TRUE(
          pb::util::JsonStringToMessage(request_json, request.get()).ok());
      // Each pair of calls is made back to back; the job runs, so a step
      // (telemetry, steps, events) may land between them: equal within a
      // few tries. MemberStatus.last_heartbeat_ms changes every
      // millisecond and is the one field ignored.
      bool equal = false;
      std::string diff;
      for (int attempt = 0; attempt < 30 && !equal; ++attempt) {
        std::unique_ptr<pb::Message> via_grpc = New(m->output_type());
        grpc::Status s = Grpc(path, *request, via_grpc.get());
        ASSERT_TRUE(s.ok())
            << path << " " << request_json << ": " << s.error_message();
        auto r = Post(path, request_json);
        ASSERT_TRUE(r) << path;
        ASSERT_EQ(r->status, 200) << path << ": " << r->body;
        EXPECT_EQ(r->get_header_value("Content-Type"), "application/json");
        std::unique_ptr<pb::Message> via_http = New(m->output_type());
        ASSERT_TRUE(pb::util::JsonStringToMessage(r->body, via_http.get()).ok())
            << r->body;
        pb::util::MessageDifferencer d;
        d.IgnoreField(v1::MemberStatus::descriptor()->FindFieldByName(
            "last_heartbeat_ms"));
        diff.clear();
        d.ReportDifferencesToString(&diff);
        equal = d.Compare(*via_grpc, *via_http);
      }
      EXPECT_TRUE(equal) << path << " " << request_json << ":\n" << diff;
    }
  }
  EXPECT_EQ(unary, static_cast<int>(requests.size()));
}

TEST_F(WebRoutesTest, ErrorsAreConnectErrorBodies) {
  struct Case {
    std::string path, body, type;
    int status;
    std::string code;
  };
  const std::string plan = "/zshard.v1.DashboardService/GetPlan";
  for (const Case& c : std::vector<Case>{
           {plan, R"({"param": "no.such.param"})", "application/json", 404,
            "not_found"},
           {plan, R"({"rank": 99})", "application/json", 400,
            "invalid_argument"},
           {plan, R"({"rank": "x"})", "application/json", 400,
            "invalid_argument"},
           {plan, R"({"noSuchField": 1})", "application/json", 400,
            "invalid_argument"},
           {plan, "{}", "text/plain", 415, "invalid_argument"},
           {"/zshard.v1.DashboardService/NoSuchMethod", "{}",
            "application/json", 404, ""},
       }) {
    auto r = Post(c.path, c.body, "", c.type);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, c.status) << c.path << " " << c.body;
    if (c.code.empty()) continue;
    json body = json::parse(r->body, nullptr, false);
    ASSERT_TRUE(body.is_object()) << r->body;
    EXPECT_EQ(body.value("code", ""), c.code) << r->body;
    EXPECT_FALSE(body.value("message", "").empty()) << r->body;
  }
  // The message is the server's own: the same as over gRPC.
  v1::GetPlanRequest req;
  req.set_param("no.such.param");
  v1::GetPlanResponse resp;
  grpc::Status s = Grpc("/zshard.v1.DashboardService/GetPlan", req, &resp);
  ASSERT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  auto r = Post(plan, R"({"param": "no.such.param"})");
  ASSERT_TRUE(r);
  EXPECT_EQ(json::parse(r->body).value("message", ""), s.error_message());
}

TEST_F(WebRoutesTest, DrainGoesThroughAdminServiceToken) {
  const std::string drain = "/zshard.v1.AdminService/DrainWorker";
  auto missing = Post(drain, R"({"name": "w1"})");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 401);
  auto wrong = Post(drain, R"({"name": "w1"})", "wrong");
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401);
  json body = json::parse(wrong->body, nullptr, false);
  EXPECT_EQ(body.value("code", ""), "unauthenticated");
  EXPECT_EQ(body.value("message", ""), "admin token is invalid");
  EXPECT_EQ(FindMember(*cluster_.Status(), "w1").value("state", ""), "ACTIVE");
  auto right = Post(drain, R"({"name": "w1"})", kToken);
  ASSERT_TRUE(right);
  EXPECT_EQ(right->status, 200) << right->body;
  EXPECT_EQ(right->body, "{}");
  // Drained: w1 leaves and the spare takes its place.
  auto after = cluster_.WaitForStatus(
      [](const json& s) {
        const json w1 = FindMember(s, "w1");
        return (w1.is_null() || w1.value("state", "") != "ACTIVE") &&
               IsStableWorld(s, kWorld, 0);
      },
      30000);
  EXPECT_TRUE(after.ok()) << after.status();
}

// Reads the SSE messages of GET `path` until `enough` says so (or 10 s):
// each as {event, data}.
std::vector<std::pair<std::string, std::string>> ReadSse(
    int port, const std::string& path,
    const std::function<bool(
        const std::vector<std::pair<std::string, std::string>>&)>& enough) {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(10, 0);
  std::vector<std::pair<std::string, std::string>> out;
  std::string buffer;
  client.Get(path.c_str(), [&](const char* data, size_t n) {
    buffer.append(data, n);
    size_t end;
    while ((end = buffer.find("\n\n")) != std::string::npos) {
      std::string event, payload;
      for (absl::string_view line :
           absl::StrSplit(buffer.substr(0, end), '\n')) {
        if (absl::ConsumePrefix(&line, "event: ")) event = std::string(line);
        if (absl::ConsumePrefix(&line, "data: ")) payload = std::string(line);
      }
      buffer.erase(0, end + 2);
      if (!event.empty()) out.emplace_back(event, payload);
    }
    return !enough(out);
  });
  return out;
}

TEST_F(WebRoutesTest, StreamsCarryTheEventLogAndThePlan) {
  v1::ListEventsResponse listed;
  ASSERT_TRUE(Grpc("/zshard.v1.DashboardService/ListEvents",
                   v1::ListEventsRequest(), &listed)
                  .ok());
  ASSERT_GE(listed.events_size(), 3);
  auto events = ReadSse(http_port_, "/events/stream?after_seq=0",
                        [](const auto& got) { return got.size() >= 3; });
  ASSERT_GE(events.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(events[i].first, "event");
    v1::Event e;
    ASSERT_TRUE(pb::util::JsonStringToMessage(events[i].second, &e).ok());
    EXPECT_TRUE(pb::util::MessageDifferencer::Equals(e, listed.events(i)))
        << events[i].second;
  }
  auto plan = ReadSse(http_port_, "/plan/stream", [](const auto& got) {
    for (const auto& m : got) {
      if (m.first == "plan") return true;
    }
    return false;
  });
  ASSERT_FALSE(plan.empty());
  EXPECT_EQ(plan[0].first, "status");
  v1::GetPlanResponse via_grpc;
  ASSERT_TRUE(Grpc("/zshard.v1.DashboardService/GetPlan", v1::GetPlanRequest(),
                   &via_grpc)
                  .ok());
  bool found = false;
  for (const auto& [event, data] : plan) {
    if (event != "plan") continue;
    v1::GetPlanResponse p;
    ASSERT_TRUE(pb::util::JsonStringToMessage(data, &p).ok());
    EXPECT_TRUE(pb::util::MessageDifferencer::Equals(p, via_grpc)) << data;
    found = true;
  }
  EXPECT_TRUE(found);
}

TEST_F(WebRoutesTest, ServesThePageAndItsFilesOnly) {
  auto index = http_->Get("/");
  ASSERT_TRUE(index);
  EXPECT_EQ(index->status, 200);
  EXPECT_NE(index->body.find("<title>zshard</title>"), std::string::npos);
  for (const char* path : {"/app.js", "/vendor/uPlot.iife.min.js",
                           "/vendor/uPlot.min.css", "/style.css"}) {
    auto r = http_->Get(path);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 200) << path;
    EXPECT_GT(r->body.size(), 100u) << path;
  }
  auto missing = http_->Get("/no-such-file.js");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  auto metrics = http_->Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("zshard_leader 1"), std::string::npos);
}

}  // namespace
}  // namespace zshard::testing
