// ParseCommandLine: a walk over the arguments that leaves the typed parsing
// of each value to Abseil and words every error itself.
#include "common/flags.h"

#include <algorithm>
#include <cstdio>

#include "absl/flags/reflection.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"

namespace zshard {
namespace {

bool IsInteger(const absl::CommandLineFlag& flag) {
  return flag.IsOfType<int32_t>() || flag.IsOfType<int64_t>() ||
         flag.IsOfType<uint32_t>() || flag.IsOfType<uint64_t>() ||
         flag.IsOfType<int16_t>() || flag.IsOfType<uint16_t>();
}

absl::Status BadValue(const absl::CommandLineFlag& flag,
                      absl::string_view value) {
  const std::string name = FlagName(flag);
  const std::string got = Shown(value);
  if (IsInteger(flag)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " must be an integer (got '", got, "')"));
  }
  if (flag.IsOfType<double>() || flag.IsOfType<float>()) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " must be a number (got '", got, "')"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat(name, " has a bad value '", got, "'"));
}

const absl::CommandLineFlag* Find(const FlagList& flags,
                                  absl::string_view dashed) {
  for (const absl::CommandLineFlag* flag : flags) {
    if (FlagName(*flag).substr(2) == dashed) return flag;
  }
  return nullptr;
}

}  // namespace

std::string FlagName(const absl::CommandLineFlag& flag) {
  return absl::StrCat("--", absl::StrReplaceAll(flag.Name(), {{"_", "-"}}));
}

std::string Shown(absl::string_view text) {
  std::string out(text.substr(0, 80));
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20) c = '?';
  }
  return out;
}

std::vector<std::string> Args(int argc, char** argv, int first) {
  if (first >= argc) return {};
  return std::vector<std::string>(argv + first, argv + argc);
}

absl::StatusOr<ParsedCommandLine> ParseCommandLine(
    absl::Span<const std::string> args, const FlagList& flags,
    const ParseOptions& options) {
  // Every parse starts from the defaults, so that its result depends on
  // its arguments only (absl::FlagSaver would too, but logs each restore).
  for (const absl::CommandLineFlag* flag : flags) {
    absl::CommandLineFlag* target = absl::FindCommandLineFlag(flag->Name());
    std::string error;
    if (target == nullptr || !target->ParseFrom(flag->DefaultValue(), &error)) {
      return absl::InternalError(
          absl::StrCat("flag ", FlagName(*flag), " cannot take its default"));
    }
  }
  ParsedCommandLine parsed;
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--help" || arg == "-h") {
      parsed.help_ = true;
      parsed.next_ = i + 1;
      return parsed;
    }
    absl::string_view body = arg;
    if (!absl::ConsumePrefix(&body, "--") || body.empty()) {
      if (options.stop_at_positional) break;
      return absl::InvalidArgumentError(
          absl::StrCat("unexpected argument '", Shown(arg), "'"));
    }
    absl::string_view name = body;
    absl::string_view value;
    bool has_value = false;
    if (size_t eq = body.find('='); eq != absl::string_view::npos) {
      name = body.substr(0, eq);
      value = body.substr(eq + 1);
      has_value = true;
    }
    const absl::CommandLineFlag* flag = Find(flags, name);
    if (flag == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag '--", Shown(name), "'"));
    }
    if (options.refuse_repeats && parsed.Given(*flag)) {
      return absl::InvalidArgumentError(
          absl::StrCat("flag ", FlagName(*flag), " is given twice"));
    }
    if (flag->IsOfType<bool>()) {
      if (has_value) {
        return absl::InvalidArgumentError(
            absl::StrCat("flag ", FlagName(*flag), " takes no value"));
      }
      value = "true";
    } else if (!has_value) {
      if (i + 1 >= args.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("flag ", FlagName(*flag), " needs a value"));
      }
      value = args[++i];
    }
    // The listed handles are const; the registry hands out the same flag
    // to be set.
    absl::CommandLineFlag* target = absl::FindCommandLineFlag(flag->Name());
    std::string error;
    if (target == nullptr || !target->ParseFrom(value, &error)) {
      return BadValue(*flag, value);
    }
    parsed.given_.insert(std::string(flag->Name()));
  }
  parsed.next_ = i;
  return parsed;
}

absl::Status CheckRange(const absl::CommandLineFlag& flag, int64_t value,
                        int64_t min, int64_t max) {
  if (value < min) {
    return absl::InvalidArgumentError(absl::StrCat(
        FlagName(flag), " must be >= ", min, " (got ", value, ")"));
  }
  if (value > max) {
    return absl::InvalidArgumentError(absl::StrCat(
        FlagName(flag), " must be <= ", max, " (got ", value, ")"));
  }
  return absl::OkStatus();
}

std::string FlagsHelp(const FlagList& flags) {
  size_t width = 0;
  for (const absl::CommandLineFlag* flag : flags) {
    width = std::max(width, FlagName(*flag).size());
  }
  std::string out;
  for (const absl::CommandLineFlag* flag : flags) {
    const std::string name = FlagName(*flag);
    const std::string help = flag->Help();
    absl::StrAppend(&out, "  ", name, std::string(width - name.size(), ' '),
                    "  ", help);
    // A help text that speaks of its default (or of none) says it best.
    const std::string fallback = flag->DefaultValue();
    if (!fallback.empty() && fallback != "false" &&
        !absl::StrContains(help, "default") &&
        !absl::StrContains(help, "required")) {
      absl::StrAppend(&out, " (default: ", fallback, ")");
    }
    out += "\n";
  }
  return out;
}

int UsageError(absl::string_view program, absl::string_view message) {
  std::string line(message);
  for (char& c : line) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  std::fprintf(stderr, "%s: %s\n", std::string(program).c_str(), line.c_str());
  return 2;
}

}  // namespace zshard
