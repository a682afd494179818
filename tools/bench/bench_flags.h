// The Abseil flags more than one zshard-bench command accepts, and the
// parse of one command's arguments with its one-line errors.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "absl/flags/declare.h"
#include "absl/status/status.h"
#include "common/flags.h"

// --output table|json (default table), --baseline, --device cpu|cuda
// (default cpu), --ranks (default 4); --params and --steps are 0 when not
// given: each command has its own default.
ABSL_DECLARE_FLAG(std::string, output);
ABSL_DECLARE_FLAG(bool, baseline);
ABSL_DECLARE_FLAG(std::string, device);
ABSL_DECLARE_FLAG(int64_t, ranks);
ABSL_DECLARE_FLAG(int64_t, params);
ABSL_DECLARE_FLAG(int64_t, steps);

namespace zshard::bench {

// Parses argv[1..argc) of `command` (argv[0] is its name) against `flags`,
// then runs `check` (the values' ranges and choices). Returns -1 to go on;
// else the exit status after printing: 0 for --help (`usage` on stdout),
// 2 for bad usage ("zshard-bench COMMAND: MESSAGE" on stderr).
int ParseBenchFlags(
    const char* command, int argc, char** argv, const FlagList& flags,
    const char* usage,
    const std::function<absl::Status(const ParsedCommandLine&)>& check);

// "zshard-bench COMMAND: MESSAGE" on stderr; returns 2.
int BenchUsageError(const char* command, const absl::Status& status);

// OK for --output table or json.
absl::Status CheckOutput();

// The value of `flag` when given, else `fallback`.
int64_t GivenOr(const ParsedCommandLine& parsed,
                const absl::Flag<int64_t>& flag, int64_t fallback);

}  // namespace zshard::bench
