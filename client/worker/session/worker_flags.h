// Command-line flags of zshard-worker, parsed into the session's and the
// channel's options. Kept out of main() so the rules are unit-tested.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/worker/session/coordinator_session.h"
#include "common/logging.h"
#include "common/net/channel.h"

namespace zshard::worker {

struct WorkerFlags {
  net::ChannelOptions channel;
  CoordinatorSession::Options session;
  LogFormat log_format = LogFormat::kText;
  // --metrics-listen HOST:PORT for /healthz and /metrics; empty: none.
  std::string metrics_listen;
  bool help = false;
};

// Looks up an environment variable (nullopt when unset); main() passes
// getenv, tests a map.
using EnvLookup = std::function<std::optional<std::string>(const char*)>;

// Parses `args` (without argv[0]). Accepts "--flag value" and
// "--flag=value". --name defaults to $POD_NAME and --coordinator to
// $ZSHARD_COORDINATOR. InvalidArgument with one line naming the flag for an
// unknown flag, a missing value, a bad --device/--labels/--log-format, a
// missing name or coordinator, a bad coordinator list (an empty entry, an
// address without a port; see net::ParseCoordinatorList), or --tls-cert
// without --tls-key.
absl::StatusOr<WorkerFlags> ParseWorkerFlags(
    const std::vector<std::string>& args, const EnvLookup& env);

// Parses "k=v,k2=v2" (empty: none). InvalidArgument for an entry without
// '=' or with an empty key.
absl::StatusOr<std::map<std::string, std::string>> ParseLabels(
    const std::string& text);

// The usage text printed by --help: the synopsis and a line per flag.
std::string WorkerUsage();

}  // namespace zshard::worker
