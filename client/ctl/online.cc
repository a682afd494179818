// Shared flags, channel and errors of zshardctl's online commands.
#include "client/ctl/online.h"

#include <chrono>
#include <cstdio>
#include <utility>

#include "absl/flags/flag.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/ctl/online_commands.h"
#include "client/ctl/shared_flags.h"
#include "common/file_io.h"
#include "common/net/coordinator_list.h"
#include "common/status.h"

namespace zshard::ctl {
namespace {

// How a standby's refusal begins (common/net/leader_redirect.h).
constexpr char kStandbyPrefix[] = "standby coordinator";

}  // namespace

absl::StatusOr<OnlineArgs> ParseOnlineArgs(const GlobalFlags& global, int argc,
                                           char** argv, FlagList extra) {
  for (const absl::CommandLineFlag* flag :
       {FlagOf(FLAGS_output), FlagOf(FLAGS_tls_ca), FlagOf(FLAGS_tls_cert),
        FlagOf(FLAGS_tls_key), FlagOf(FLAGS_timeout_ms)}) {
    extra.push_back(flag);
  }
  OnlineArgs args;
  ZSHARD_ASSIGN_OR_RETURN(args.parsed, ParseCommandFlags(argc, argv, extra));
  if (args.parsed.help()) {
    args.flags_help = FlagsHelp(extra);
    return args;
  }
  const std::string output = absl::GetFlag(FLAGS_output);
  if (output != "table" && output != "json") {
    return absl::InvalidArgumentError("--output must be table or json");
  }
  args.json = output == "json";
  ZSHARD_RETURN_IF_ERROR(CheckRange(FLAGS_timeout_ms, 1, 3600000));
  args.timeout_ms = absl::GetFlag(FLAGS_timeout_ms);
  // A command's own flags win over the global ones.
  const ParsedCommandLine& p = args.parsed;
  auto command_or = [&p](const absl::Flag<std::string>& flag,
                         const std::string& global_value) {
    return p.Given(flag) ? absl::GetFlag(flag) : global_value;
  };
  args.channel.target = command_or(FLAGS_coordinator, global.coordinator);
  args.channel.tls_ca_file = command_or(FLAGS_tls_ca, global.tls_ca);
  args.channel.tls_cert_file = command_or(FLAGS_tls_cert, global.tls_cert);
  args.channel.tls_key_file = command_or(FLAGS_tls_key, global.tls_key);
  if (args.channel.target.empty()) {
    return absl::InvalidArgumentError(
        "--coordinator HOST:PORT is required (before the command)");
  }
  ZSHARD_RETURN_IF_ERROR(
      net::ParseCoordinatorList(args.channel.target).status());
  return args;
}

int PrintUsage(const char* usage, const OnlineArgs& args) {
  std::printf("%s\n%s", usage, args.flags_help.c_str());
  return 0;
}

absl::StatusOr<std::unique_ptr<net::LeaderFollower>> Connect(
    const OnlineArgs& args) {
  return net::LeaderFollower::Create(args.channel);
}

std::unique_ptr<grpc::ClientContext> CallContext(const OnlineArgs& args,
                                                 bool stream) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  if (!stream) {
    ctx->set_deadline(std::chrono::system_clock::now() +
                      std::chrono::milliseconds(args.timeout_ms));
  }
  return ctx;
}

int ReportRpcError(const char* command, const OnlineArgs& args,
                   const grpc::Status& status) {
  // Standbys answered, and none named a leader that answered.
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE &&
      absl::StartsWith(status.error_message(), kStandbyPrefix)) {
    std::fprintf(stderr, "zshardctl %s: coordinator %s: %s\n", command,
                 args.channel.target.c_str(), status.error_message().c_str());
    return 3;
  }
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      std::fprintf(stderr, "zshardctl %s: coordinator %s is unreachable\n",
                   command, args.channel.target.c_str());
      return 3;
    default:
      break;
  }
  std::string message = status.error_message();
  for (char& c : message) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  if (status.error_code() == grpc::StatusCode::UNAUTHENTICATED ||
      status.error_code() == grpc::StatusCode::PERMISSION_DENIED) {
    std::fprintf(stderr,
                 "zshardctl %s: coordinator %s refused the request: %s\n",
                 command, args.channel.target.c_str(), message.c_str());
    return 3;
  }
  std::fprintf(stderr, "zshardctl %s: coordinator %s: %s\n", command,
               args.channel.target.c_str(), message.c_str());
  return status.error_code() == grpc::StatusCode::INVALID_ARGUMENT ? 2 : 1;
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("token file ", path, ": ", text.status().message()));
  }
  std::string token(absl::StripAsciiWhitespace(*text));
  if (token.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("token file ", path, " is empty"));
  }
  return token;
}

void AddBearerToken(grpc::ClientContext* context, const std::string& token) {
  if (!token.empty()) context->AddMetadata("authorization", "Bearer " + token);
}

const char* MemberStateName(v1::MemberState state) {
  switch (state) {
    case v1::MEMBER_STATE_JOINING:
      return "JOINING";
    case v1::MEMBER_STATE_ACTIVE:
      return "ACTIVE";
    case v1::MEMBER_STATE_SPARE:
      return "SPARE";
    case v1::MEMBER_STATE_DRAINING:
      return "DRAINING";
    case v1::MEMBER_STATE_DEAD:
      return "DEAD";
    case v1::MEMBER_STATE_LEFT:
      return "LEFT";
    default:
      return "UNKNOWN";
  }
}

std::string Rfc3339(int64_t time_ms) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::FromUnixMillis(time_ms),
                          absl::UTCTimeZone());
}

}  // namespace zshard::ctl
