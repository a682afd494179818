// The Connect protocol's unary JSON form over the coordinator's own gRPC
// services: POST /PACKAGE.SERVICE/METHOD with a request message in
// protobuf's canonical JSON is called on the coordinator's gRPC server (an
// in-process channel) and the response comes back as canonical JSON, or
// as Connect's JSON error body. Routes come from the services' descriptors:
// every unary method, and nothing else.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "google/protobuf/descriptor.h"
#include "grpcpp/channel.h"

namespace zshard::server::web {

// An HTTP answer: status code, content type and body.
struct HttpReply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
};

// Connect's name for `code` ("not_found") and its HTTP status (404).
std::string ConnectCode(absl::StatusCode code);
int ConnectHttpStatus(absl::StatusCode code);
// {"code": ..., "message": ...} with its HTTP status.
HttpReply ConnectError(const absl::Status& status);

// Returns the channel to the coordinator's current gRPC server (the
// leader's services or the standby's answer); null while none serves.
using ChannelSource = std::function<std::shared_ptr<grpc::Channel>()>;

// Thread-safe (immutable after construction).
class JsonGateway {
 public:
  // Serves every unary method of `services` (the descriptors are the
  // generated pool's and live forever). Each call is bounded by
  // `timeout_ms`.
  JsonGateway(
      ChannelSource channels,
      const std::vector<const google::protobuf::ServiceDescriptor*>& services,
      int64_t timeout_ms = 10000);

  // The paths served, "/zshard.v1.DashboardService/GetPlan", sorted.
  std::vector<std::string> Paths() const;

  // The answer to POST `path`. `content_type` must be application/json
  // (415 otherwise: a browser cannot send that cross-origin without a
  // preflight, which is never answered); an empty body is the empty
  // message. `authorization` (may be empty) is passed on as the gRPC
  // "authorization" metadata (AdminService's bearer token).
  HttpReply Call(const std::string& path, const std::string& content_type,
                 const std::string& body,
                 const std::string& authorization) const;

  // The response message of `path` for the JSON request `json`, as
  // canonical JSON; the gRPC status (converted) when the call fails,
  // NotFound for a path that is not served.
  absl::StatusOr<std::string> CallJson(const std::string& path,
                                       const std::string& json,
                                       const std::string& authorization) const;

 private:
  const ChannelSource channels_;
  const int64_t timeout_ms_;
  std::map<std::string, const google::protobuf::MethodDescriptor*> methods_;
};

}  // namespace zshard::server::web
