// Command-line parsing for every zshard binary over Abseil flags. Flags are
// defined with ABSL_FLAG (names with '_', written with '-' on the command
// line: absl flag dump_master is --dump-master); ParseCommandLine reads one
// command line, or one subcommand's part of it, into the flags the caller
// lists and refuses every other one. Errors are one line naming the flag,
// for the binary's "PROGRAM: MESSAGE" on stderr and exit status 2.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace zshard {

// The flags one command line accepts, from FlagOf(FLAGS_name).
using FlagList = std::vector<const absl::CommandLineFlag*>;

template <typename T>
const absl::CommandLineFlag* FlagOf(const absl::Flag<T>& flag) {
  return &absl::GetFlagReflectionHandle(flag);
}

// "--dump-master" for the absl flag dump_master.
std::string FlagName(const absl::CommandLineFlag& flag);
template <typename T>
std::string FlagName(const absl::Flag<T>& flag) {
  return FlagName(*FlagOf(flag));
}

struct ParseOptions {
  // Stop at the first argument that is not a flag (a command name) instead
  // of refusing it. Default false.
  bool stop_at_positional = false;
  // Refuse a flag given twice. Default false: the last one wins.
  bool refuse_repeats = false;
};

// What ParseCommandLine saw besides the flags' values.
class ParsedCommandLine {
 public:
  // --help or -h was given; parsing stopped there.
  bool help() const { return help_; }
  // Index in the arguments of the first one not consumed: args.size()
  // unless parsing stopped at a positional argument or at --help.
  size_t next() const { return next_; }
  // Whether `flag` was on the command line (a default is not).
  bool Given(const absl::CommandLineFlag& flag) const {
    return given_.count(flag.Name()) > 0;
  }
  template <typename T>
  bool Given(const absl::Flag<T>& flag) const {
    return Given(*FlagOf(flag));
  }

 private:
  friend absl::StatusOr<ParsedCommandLine> ParseCommandLine(
      absl::Span<const std::string> args, const FlagList& flags,
      const ParseOptions& options);
  bool help_ = false;
  size_t next_ = 0;
  std::set<std::string, std::less<>> given_;
};

// Parses `args` (no program name) into `flags`: --name=VALUE, --name VALUE,
// and --name alone for a bool flag. Values are parsed by Abseil into the
// flag's type. InvalidArgument with one line naming the flag or argument:
// "unknown flag '--x'", "unexpected argument 'x'", "flag --x needs a
// value", "flag --x takes no value", "flag --x is given twice",
// "--x must be an integer (got 'v')", "--x must be a number (got 'v')",
// "--x has a bad value 'v'". Every flag in `flags` is first set back to
// its default, so the result depends on `args` only.
absl::StatusOr<ParsedCommandLine> ParseCommandLine(
    absl::Span<const std::string> args, const FlagList& flags,
    const ParseOptions& options = {});

// argv[first..argc) as strings.
std::vector<std::string> Args(int argc, char** argv, int first = 1);

// OK when the value of integer flag `flag` lies in [min, max]; else
// InvalidArgument "--x must be >= MIN (got V)" or "... <= MAX ...".
absl::Status CheckRange(const absl::CommandLineFlag& flag, int64_t value,
                        int64_t min, int64_t max);
template <typename T>
absl::Status CheckRange(const absl::Flag<T>& flag, int64_t min, int64_t max) {
  return CheckRange(*FlagOf(flag), static_cast<int64_t>(absl::GetFlag(flag)),
                    min, max);
}

// One line per flag, names aligned: "  --name  HELP (default: D)"; no
// default shown for an empty string, a false bool, or a help text that
// speaks of "default" or "required" itself.
std::string FlagsHelp(const FlagList& flags);

// `text` cut to 80 characters with control characters shown as '?', for
// quoting user input in a one-line message.
std::string Shown(absl::string_view text);

// Prints "PROGRAM: MESSAGE" as one line on stderr and returns 2, the exit
// status of bad usage.
int UsageError(absl::string_view program, absl::string_view message);

}  // namespace zshard
