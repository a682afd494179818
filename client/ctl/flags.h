// A small command-line flag parser for zshardctl: --name VALUE,
// --name=VALUE and boolean --name, with statuses naming the flag.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace zshard::ctl {

struct FlagSpec {
  std::string name;  // without the leading "--"
  bool takes_value = true;
};

// The flags of one command line. Values are kept as given.
class ParsedFlags {
 public:
  bool Has(absl::string_view name) const;
  // The value of `name`, or `fallback` when absent.
  std::string Get(absl::string_view name, absl::string_view fallback) const;
  // The value of `name` as an integer in [min, max], or `fallback` when
  // absent. InvalidArgument naming the flag when it is not one.
  absl::StatusOr<int64_t> GetInt(absl::string_view name, int64_t fallback,
                                 int64_t min, int64_t max) const;

  void Set(const std::string& name, const std::string& value) {
    values_[name] = value;
  }

 private:
  std::map<std::string, std::string, std::less<>> values_;
};

// Parses args[first..argc) against `specs`. InvalidArgument on an unknown
// flag, a positional argument, a missing value or a flag given twice.
absl::StatusOr<ParsedFlags> ParseFlags(int argc, char** argv, int first,
                                       const std::vector<FlagSpec>& specs);

}  // namespace zshard::ctl
