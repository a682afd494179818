// Connect unary JSON over a generic gRPC call (see json_gateway.h).
#include "server/web/json_gateway.h"

#include <chrono>
#include <memory>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/grpc_status.h"
#include "google/protobuf/dynamic_message.h"
#include "google/protobuf/message.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/client_context.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/support/byte_buffer.h"
#include "nlohmann/json.hpp"

namespace zshard::server::web {
namespace {

namespace pb = google::protobuf;

// A new message of `type` from the generated pool's factory.
std::unique_ptr<pb::Message> NewMessage(const pb::Descriptor* type) {
  const pb::Message* prototype =
      pb::MessageFactory::generated_factory()->GetPrototype(type);
  if (prototype == nullptr) return nullptr;
  return std::unique_ptr<pb::Message>(prototype->New());
}

absl::Status FromProtobufStatus(const pb::util::Status& s,
                                absl::string_view what) {
  if (s.ok()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(what, ": ", std::string(s.message())));
}

}  // namespace

std::string ConnectCode(absl::StatusCode code) {
  // gRPC's names in lower case, but for Connect's spelling of "canceled".
  if (code == absl::StatusCode::kCancelled) return "canceled";
  std::string name = absl::AsciiStrToLower(absl::StatusCodeToString(code));
  return name.empty() ? "unknown" : name;
}

int ConnectHttpStatus(absl::StatusCode code) {
  // The Connect protocol's table (its "Error Codes" section).
  switch (code) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kCancelled:
      return 499;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
      return 400;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kAborted:
      return 409;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    case absl::StatusCode::kUnimplemented:
      return 501;
    case absl::StatusCode::kUnavailable:
      return 503;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    default:
      return 500;
  }
}

HttpReply ConnectError(const absl::Status& status) {
  HttpReply reply;
  reply.status = ConnectHttpStatus(status.code());
  nlohmann::json body = {{"code", ConnectCode(status.code())},
                         {"message", std::string(status.message())}};
  reply.body = body.dump();
  return reply;
}

JsonGateway::JsonGateway(
    ChannelSource channels,
    const std::vector<const pb::ServiceDescriptor*>& services,
    int64_t timeout_ms)
    : channels_(std::move(channels)), timeout_ms_(timeout_ms) {
  for (const pb::ServiceDescriptor* service : services) {
    for (int i = 0; i < service->method_count(); ++i) {
      const pb::MethodDescriptor* m = service->method(i);
      if (m->client_streaming() || m->server_streaming()) continue;
      methods_[absl::StrCat("/", service->full_name(), "/", m->name())] = m;
    }
  }
}

std::vector<std::string> JsonGateway::Paths() const {
  std::vector<std::string> out;
  for (const auto& [path, method] : methods_) out.push_back(path);
  return out;
}

absl::StatusOr<std::string> JsonGateway::CallJson(
    const std::string& path, const std::string& json,
    const std::string& authorization) const {
  auto it = methods_.find(path);
  if (it == methods_.end()) {
    return absl::NotFoundError(absl::StrCat("no unary method at ", path));
  }
  const pb::MethodDescriptor* method = it->second;
  std::unique_ptr<pb::Message> request = NewMessage(method->input_type());
  std::unique_ptr<pb::Message> response = NewMessage(method->output_type());
  if (request == nullptr || response == nullptr) {
    return absl::InternalError(
        absl::StrCat("no generated message for ", method->full_name()));
  }
  if (!json.empty()) {
    pb::util::JsonParseOptions parse;
    parse.ignore_unknown_fields = false;
    absl::Status parsed = FromProtobufStatus(
        pb::util::JsonStringToMessage(json, request.get(), parse),
        absl::StrCat("request is not a ", method->input_type()->full_name()));
    if (!parsed.ok()) return parsed;
  }
  std::shared_ptr<grpc::Channel> channel = channels_();
  if (channel == nullptr) {
    return absl::UnavailableError("the coordinator's gRPC server is not up");
  }
  std::string wire;
  if (!request->SerializeToString(&wire)) {
    return absl::InternalError("cannot serialise the request");
  }
  grpc::Slice slice(wire);
  grpc::ByteBuffer request_bytes(&slice, 1);
  grpc::ByteBuffer response_bytes;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::milliseconds(timeout_ms_));
  if (!authorization.empty()) {
    context.AddMetadata("authorization", authorization);
  }
  grpc::GenericStub stub(channel);
  absl::Notification done;
  grpc::Status status;
  stub.UnaryCall(&context, path, grpc::StubOptions(), &request_bytes,
                 &response_bytes, [&](grpc::Status s) {
                   status = std::move(s);
                   done.Notify();
                 });
  done.WaitForNotification();
  if (!status.ok()) return FromGrpcStatus(status);
  std::vector<grpc::Slice> slices;
  if (!response_bytes.Dump(&slices).ok()) {
    return absl::InternalError("cannot read the response");
  }
  std::string out_wire;
  for (const grpc::Slice& s : slices) {
    out_wire.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  if (!response->ParseFromString(out_wire)) {
    return absl::InternalError(absl::StrCat(
        "the response is not a ", method->output_type()->full_name()));
  }
  std::string out;
  pb::util::JsonPrintOptions print;
  pb::util::Status printed =
      pb::util::MessageToJsonString(*response, &out, print);
  if (!printed.ok()) {
    return absl::InternalError(absl::StrCat("cannot print the response: ",
                                            std::string(printed.message())));
  }
  return out;
}

HttpReply JsonGateway::Call(const std::string& path,
                            const std::string& content_type,
                            const std::string& body,
                            const std::string& authorization) const {
  const std::string type = absl::AsciiStrToLower(content_type);
  if (!absl::StartsWith(type, "application/json")) {
    HttpReply reply = ConnectError(absl::InvalidArgumentError(absl::StrCat(
        "content type '", content_type, "' is not application/json")));
    reply.status = 415;
    return reply;
  }
  absl::StatusOr<std::string> out = CallJson(path, body, authorization);
  if (!out.ok()) return ConnectError(out.status());
  HttpReply reply;
  reply.body = *std::move(out);
  return reply;
}

}  // namespace zshard::server::web
