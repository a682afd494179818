// Flag parsing for zshardctl.
#include "client/ctl/flags.h"

#include <limits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace zshard::ctl {
namespace {

std::string Shown(absl::string_view s) {
  std::string out(s.substr(0, 80));
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20) c = '?';
  }
  return out;
}

}  // namespace

bool ParsedFlags::Has(absl::string_view name) const {
  return values_.find(name) != values_.end();
}

std::string ParsedFlags::Get(absl::string_view name,
                             absl::string_view fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? std::string(fallback) : it->second;
}

absl::StatusOr<int64_t> ParsedFlags::GetInt(absl::string_view name,
                                            int64_t fallback, int64_t min,
                                            int64_t max) const {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  int64_t value = 0;
  if (!absl::SimpleAtoi(it->second, &value)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", name, " must be an integer (got '", Shown(it->second), "')"));
  }
  if (value < min) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, " must be >= ", min, " (got ", value, ")"));
  }
  if (value > max) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, " must be <= ", max, " (got ", value, ")"));
  }
  return value;
}

absl::StatusOr<ParsedFlags> ParseFlags(int argc, char** argv, int first,
                                       const std::vector<FlagSpec>& specs) {
  ParsedFlags flags;
  for (int i = first; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (!absl::ConsumePrefix(&arg, "--") || arg.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("unexpected argument '", Shown(argv[i]), "'"));
    }
    absl::string_view name = arg;
    absl::string_view value;
    bool has_value = false;
    if (size_t eq = arg.find('='); eq != absl::string_view::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      has_value = true;
    }
    const FlagSpec* spec = nullptr;
    for (const FlagSpec& s : specs) {
      if (s.name == name) spec = &s;
    }
    if (spec == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag '--", Shown(name), "'"));
    }
    if (flags.Has(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("flag --", name, " is given twice"));
    }
    if (!spec->takes_value) {
      if (has_value) {
        return absl::InvalidArgumentError(
            absl::StrCat("flag --", name, " takes no value"));
      }
      flags.Set(spec->name, "true");
      continue;
    }
    if (!has_value) {
      if (i + 1 >= argc) {
        return absl::InvalidArgumentError(
            absl::StrCat("flag --", name, " needs a value"));
      }
      value = argv[++i];
    }
    flags.Set(spec->name, std::string(value));
  }
  return flags;
}

}  // namespace zshard::ctl
