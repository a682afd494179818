// Definitions of zshard-bench's shared flags.
#include "tools/bench/bench_flags.h"

#include <cstdio>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"

ABSL_FLAG(std::string, output, "table", "table or json");
ABSL_FLAG(bool, baseline, false, "also run the torch baseline");
ABSL_FLAG(std::string, device, "cpu", "cpu or cuda");
ABSL_FLAG(int64_t, ranks, 4, "ranks (threads or processes)");
ABSL_FLAG(int64_t, params, 0, "parameters (default: the command's)");
ABSL_FLAG(int64_t, steps, 0, "timed steps (default: the command's)");

namespace zshard::bench {

int ParseBenchFlags(
    const char* command, int argc, char** argv, const FlagList& flags,
    const char* usage,
    const std::function<absl::Status(const ParsedCommandLine&)>& check) {
  absl::StatusOr<ParsedCommandLine> parsed =
      ParseCommandLine(Args(argc, argv), flags);
  if (!parsed.ok()) return BenchUsageError(command, parsed.status());
  if (parsed->help()) {
    std::fputs(usage, stdout);
    return 0;
  }
  if (absl::Status s = check(*parsed); !s.ok()) {
    return BenchUsageError(command, s);
  }
  return -1;
}

int BenchUsageError(const char* command, const absl::Status& status) {
  return UsageError(absl::StrCat("zshard-bench ", command), status.message());
}

absl::Status CheckOutput() {
  const std::string output = absl::GetFlag(FLAGS_output);
  if (output != "table" && output != "json") {
    return absl::InvalidArgumentError("--output must be table or json");
  }
  return absl::OkStatus();
}

int64_t GivenOr(const ParsedCommandLine& parsed,
                const absl::Flag<int64_t>& flag, int64_t fallback) {
  return parsed.Given(flag) ? absl::GetFlag(flag) : fallback;
}

}  // namespace zshard::bench
