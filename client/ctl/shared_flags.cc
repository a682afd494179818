// Definitions of zshardctl's shared flags.
#include "client/ctl/shared_flags.h"

#include "absl/flags/flag.h"

ABSL_FLAG(std::string, coordinator, "",
          "HOST:PORT of a running coordinator, or a comma-separated list of "
          "them (several coordinators: commands follow the leader; online "
          "commands)");
ABSL_FLAG(std::string, tls_ca, "", "PEM CA of the coordinator's certificate");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM client certificate for mutual TLS (with --tls-key)");
ABSL_FLAG(std::string, tls_key, "", "PEM client key for mutual TLS");
ABSL_FLAG(std::string, token_file, "",
          "file holding the admin token (default $ZSHARD_ADMIN_TOKEN_FILE)");
ABSL_FLAG(std::string, output, "table", "table or json");
ABSL_FLAG(int64_t, timeout_ms, 5000, "deadline of each call, milliseconds");
ABSL_FLAG(std::string, job, "",
          "the job spec (JSON): checkpoint's job (required), or the model, "
          "parallel sizes and world of plan and ledger");
ABSL_FLAG(int64_t, rank, -1, "only this rank (default: every rank)");

namespace zshard::ctl {

FlagList GlobalFlagList() {
  return {FlagOf(FLAGS_coordinator), FlagOf(FLAGS_tls_ca),
          FlagOf(FLAGS_tls_cert), FlagOf(FLAGS_tls_key),
          FlagOf(FLAGS_token_file)};
}

absl::StatusOr<ParsedCommandLine> ParseCommandFlags(int argc, char** argv,
                                                    const FlagList& flags) {
  ParseOptions options;
  options.refuse_repeats = true;
  return ParseCommandLine(Args(argc, argv), flags, options);
}

}  // namespace zshard::ctl
