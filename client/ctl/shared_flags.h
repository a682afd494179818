// The Abseil flags that more than one part of zshardctl accepts: the global
// ones given before the command (--coordinator, the TLS files,
// --token-file, which online commands may give again), --output,
// --timeout-ms, plan's --rank and --job (checkpoint, plan, ledger); and the
// parse of one command's arguments.
#pragma once

#include <cstdint>
#include <string>

#include "absl/flags/declare.h"
#include "absl/status/statusor.h"
#include "common/flags.h"

ABSL_DECLARE_FLAG(std::string, coordinator);
ABSL_DECLARE_FLAG(std::string, tls_ca);
ABSL_DECLARE_FLAG(std::string, tls_cert);
ABSL_DECLARE_FLAG(std::string, tls_key);
ABSL_DECLARE_FLAG(std::string, token_file);
ABSL_DECLARE_FLAG(std::string, output);
ABSL_DECLARE_FLAG(int64_t, timeout_ms);
ABSL_DECLARE_FLAG(std::string, job);
ABSL_DECLARE_FLAG(int64_t, rank);

namespace zshard::ctl {

// The flags given before the command: --coordinator, --tls-ca, --tls-cert,
// --tls-key, --token-file.
FlagList GlobalFlagList();

// Parses a command's arguments argv[1..argc) (argv[0] is its name) against
// `flags`, the command's own set: a flag outside it, a positional argument
// or a flag given twice is refused (InvalidArgument, one line).
absl::StatusOr<ParsedCommandLine> ParseCommandFlags(int argc, char** argv,
                                                    const FlagList& flags);

}  // namespace zshard::ctl
