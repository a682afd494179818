// What zshardctl's online commands share: the flags that reach a running
// coordinator (TLS, timeout, output), the channels to the coordinators
// given and the calls that follow their leader, the admin token, and the
// one-line errors with their exit statuses (2 usage, 3 coordinator
// unreachable or refusing the caller, 1 other).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/ctl/commands.h"
#include "common/flags.h"
#include "common/net/channel.h"
#include "common/net/leader_follower.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"

namespace zshard::ctl {

struct OnlineArgs {
  net::ChannelOptions channel;  // target: the --coordinator list
  bool json = false;            // --output json (default table)
  int64_t timeout_ms = 5000;    // --timeout-ms, per call
  ParsedCommandLine parsed;     // which flags were given; help()
  std::string flags_help;       // FlagsHelp of the command's flags
};

// Parses argv[1..argc) against --output, --tls-ca, --tls-cert, --tls-key,
// --timeout-ms plus `extra` (the command's own Abseil flags); the command's
// TLS flags default to the global ones, and --coordinator, when `extra`
// has it, to the global one. InvalidArgument naming the flag; also when no
// coordinator is given or the list is bad (an empty entry, an address
// without a port). With --help, only `parsed` and `flags_help` are set.
absl::StatusOr<OnlineArgs> ParseOnlineArgs(const GlobalFlags& global, int argc,
                                           char** argv, FlagList extra);

// Prints `usage` and the flags' help on stdout; returns 0.
int PrintUsage(const char* usage, const OnlineArgs& args);

// A channel per coordinator given (connecting lazily), the first one
// current. InvalidArgument for bad TLS files.
absl::StatusOr<std::unique_ptr<net::LeaderFollower>> Connect(
    const OnlineArgs& args);

// A context with the call deadline; `stream` contexts have none.
std::unique_ptr<grpc::ClientContext> CallContext(const OnlineArgs& args,
                                                 bool stream = false);

// Prints one line on stderr for a failed call and returns the exit status:
// 3 when the coordinator cannot be reached (UNAVAILABLE, DEADLINE_EXCEEDED;
// a TLS mismatch reads as unreachable; a standby's "no leader yet" is
// printed as such) or refuses the caller
// (UNAUTHENTICATED, PERMISSION_DENIED: a missing or wrong admin token),
// 2 for INVALID_ARGUMENT, 1 otherwise. No gRPC internals are printed.
int ReportRpcError(const char* command, const OnlineArgs& args,
                   const grpc::Status& status);

// The admin token in file `path` (surrounding whitespace dropped).
// InvalidArgument naming the file when it cannot be read or is empty.
absl::StatusOr<std::string> ReadTokenFile(const std::string& path);

// Adds `authorization: Bearer TOKEN` to `context` (nothing for "").
void AddBearerToken(grpc::ClientContext* context, const std::string& token);

// "2026-11-29T11:40:00.123Z" for milliseconds since the Unix epoch.
std::string Rfc3339(int64_t time_ms);

// One unary call of `Service` on the leading coordinator: `call(stub,
// context)` with a fresh CallContext (and the bearer `token`, unless
// empty) per attempt; a standby is followed to the leader it names, an
// unreachable coordinator (or one past its deadline) to the next in the
// list (net::CallOnLeader), and an election is waited out until
// --timeout-ms has passed since the first attempt
// (net::RetryThroughElection). Returns the last attempt's status.
template <typename Service>
grpc::Status CallLeader(
    net::LeaderFollower& coordinators, const OnlineArgs& args,
    const std::function<grpc::Status(typename Service::Stub&,
                                     grpc::ClientContext*)>& call,
    const std::string& token = "") {
  net::FollowOptions follow;
  follow.deadline_is_unreachable = true;
  return net::RetryThroughElection(
      coordinators, absl::Milliseconds(args.timeout_ms), [&] {
        return net::CallOnLeader(
            coordinators,
            [&args, &token] {
              std::unique_ptr<grpc::ClientContext> context = CallContext(args);
              AddBearerToken(context.get(), token);
              return context;
            },
            [&call](const std::shared_ptr<grpc::Channel>& channel,
                    grpc::ClientContext* context) {
              return call(*Service::NewStub(channel), context);
            },
            follow);
      });
}

}  // namespace zshard::ctl
