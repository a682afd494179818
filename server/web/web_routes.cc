// The dashboard's routes (see web_routes.h).
#include "server/web/web_routes.h"

#include <httplib.h>

#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/util/json_util.h"
#include "server/web/event_feed.h"
#include "server/web/web_assets.h"
#include "zshard/v1/admin_service.grpc.pb.h"
#include "zshard/v1/dashboard_service.grpc.pb.h"

namespace zshard::server::web {
namespace {

// One SSE message: `event` names it, `data` is one line of JSON.
std::string SseMessage(const std::string& event, const std::string& data,
                       int64_t id = -1) {
  std::string out;
  if (id >= 0) absl::StrAppend(&out, "id: ", id, "\n");
  absl::StrAppend(&out, "event: ", event, "\ndata: ", data, "\n\n");
  return out;
}

bool Write(httplib::DataSink& sink, const std::string& text) {
  return sink.is_writable() && sink.write(text.data(), text.size());
}

std::string EventJson(const v1::Event& e) {
  std::string out;
  (void)google::protobuf::util::MessageToJsonString(e, &out);
  return out;
}

// The stream's end as an SSE "error" message (Connect's error body).
std::string EndMessage(const absl::Status& status) {
  return SseMessage("error", ConnectError(status).body);
}

constexpr absl::string_view kAdminPrefix = "/zshard.v1.AdminService/";

void AddNoStore(httplib::Response& res) {
  res.set_header("Cache-Control", "no-store");
}

// The services served as JSON, from the generated descriptor pool (linked
// in with their generated code, so never missing).
std::vector<const google::protobuf::ServiceDescriptor*> JsonServices() {
  std::vector<const google::protobuf::ServiceDescriptor*> out;
  for (const char* name : {v1::DashboardService::service_full_name(),
                           v1::AdminService::service_full_name()}) {
    const google::protobuf::ServiceDescriptor* s =
        google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
            name);
    if (s != nullptr) out.push_back(s);
  }
  return out;
}

}  // namespace

WebRoutes::WebRoutes(ChannelSource channels, WebOptions options)
    : channels_(std::move(channels)),
      options_(options),
      gateway_(channels_, JsonServices(), options.call_timeout_ms),
      stopping_(std::make_shared<std::atomic<bool>>(false)) {}

void WebRoutes::Stop() { stopping_->store(true); }

void WebRoutes::Install(httplib::Server* http) {
  // Open streams hold a thread each: more than the default 8.
  http->new_task_queue = [] { return new httplib::ThreadPool(32); };
  for (const std::string& path : gateway_.Paths()) {
    http->Post(path, [this, path](const httplib::Request& req,
                                  httplib::Response& res) {
      HttpReply reply =
          !options_.admin && absl::StartsWith(path, kAdminPrefix)
              ? ConnectError(absl::FailedPreconditionError(
                    "admin calls are off on the dashboard's plain-HTTP port "
                    "while the coordinator's gRPC uses TLS (the admin token "
                    "would travel in clear): use zshardctl"))
              : gateway_.Call(path, req.get_header_value("Content-Type"),
                              req.body, req.get_header_value("Authorization"));
      res.status = reply.status;
      AddNoStore(res);
      res.set_content(reply.body, reply.content_type.c_str());
    });
  }
  ServeEvents(http);
  ServePlan(http);
  http->Get(R"(/([A-Za-z0-9_./-]*))",
            [](const httplib::Request& req, httplib::Response& res) {
              std::string path = req.matches[1];
              if (path.empty()) path = "index.html";
              const WebAsset* asset = FindWebAsset(path);
              if (asset == nullptr) {
                res.status = 404;
                res.set_content("not found\n", "text/plain");
                return;
              }
              res.set_content(reinterpret_cast<const char*>(asset->data),
                              asset->size, asset->content_type);
            });
}

std::shared_ptr<grpc::Channel> WebRoutes::StreamChannel(
    httplib::Response& res) {
  std::shared_ptr<grpc::Channel> channel = channels_();
  AddNoStore(res);
  if (channel == nullptr) {
    res.status = 503;
    res.set_content(ConnectError(absl::UnavailableError("no gRPC server")).body,
                    "application/json");
  }
  return channel;
}

void WebRoutes::ServeEvents(httplib::Server* http) {
  http->Get("/events/stream", [this](const httplib::Request& req,
                                     httplib::Response& res) {
    int64_t after = 0;
    std::string from = req.get_header_value("Last-Event-ID");
    if (from.empty()) from = req.get_param_value("after_seq");
    if (!from.empty() && !absl::SimpleAtoi(from, &after)) after = 0;
    std::shared_ptr<grpc::Channel> channel = StreamChannel(res);
    if (channel == nullptr) return;
    auto feed = std::make_shared<EventFeed>(channel, after);
    const absl::Duration keepalive = absl::Milliseconds(options_.keepalive_ms);
    res.set_chunked_content_provider(
        "text/event-stream", [feed, keepalive, stopping = stopping_](
                                 size_t, httplib::DataSink& sink) {
          if (stopping->load()) return false;
          absl::Status ended;
          std::optional<v1::Event> e = feed->Next(keepalive, &ended);
          if (e.has_value()) {
            return Write(sink, SseMessage("event", EventJson(*e), e->seq()));
          }
          if (!ended.ok()) {
            Write(sink, EndMessage(ended));
            return false;
          }
          return Write(sink, ": keepalive\n\n");
        });
  });
}

void WebRoutes::ServePlan(httplib::Server* http) {
  http->Get("/plan/stream", [this](const httplib::Request&,
                                   httplib::Response& res) {
    std::shared_ptr<grpc::Channel> channel = StreamChannel(res);
    if (channel == nullptr) return;
    auto feed = std::make_shared<EventFeed>(channel, -1);
    // The last plan sent; a status follows every event.
    auto last_plan = std::make_shared<std::string>();
    auto pending = std::make_shared<bool>(true);
    const absl::Duration keepalive = absl::Milliseconds(options_.keepalive_ms);
    const JsonGateway* gateway = &gateway_;
    res.set_chunked_content_provider(
        "text/event-stream",
        [feed, last_plan, pending, keepalive, gateway, stopping = stopping_](
            size_t, httplib::DataSink& sink) {
          if (stopping->load()) return false;
          if (!*pending) {
            absl::Status ended;
            std::optional<v1::Event> e = feed->Next(keepalive, &ended);
            if (!e.has_value()) {
              if (!ended.ok()) {
                Write(sink, EndMessage(ended));
                return false;
              }
              return Write(sink, ": keepalive\n\n");
            }
          }
          *pending = false;
          absl::StatusOr<std::string> status = gateway->CallJson(
              "/zshard.v1.DashboardService/GetClusterStatus", "{}", "");
          if (!status.ok()) {
            Write(sink, EndMessage(status.status()));
            return false;
          }
          if (!Write(sink, SseMessage("status", *status))) return false;
          absl::StatusOr<std::string> plan = gateway->CallJson(
              "/zshard.v1.DashboardService/GetPlan", "{}", "");
          // No plan before the first epoch (FAILED_PRECONDITION): wait.
          if (!plan.ok() || *plan == *last_plan) return true;
          *last_plan = *plan;
          return Write(sink, SseMessage("plan", *plan));
        });
  });
}

}  // namespace zshard::server::web
