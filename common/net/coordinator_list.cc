// ParseCoordinatorList: the split and the HOST:PORT check of each entry.

#include "common/net/coordinator_list.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace zshard::net {
namespace {

absl::Status CheckAddress(absl::string_view address) {
  size_t colon = absl::string_view::npos;
  bool has_host = false;
  if (!address.empty() && address.front() == '[') {
    const size_t close = address.find(']');
    if (close == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("coordinator address '", address, "' has no ']'"));
    }
    has_host = close > 1;
    if (close + 1 < address.size() && address[close + 1] == ':') {
      colon = close + 1;
    }
  } else {
    colon = address.rfind(':');
    has_host = colon != 0;
    // A bare IPv6 address ("::1") needs brackets to carry a port.
    if (colon != absl::string_view::npos &&
        address.substr(0, colon).find(':') != absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("coordinator address '", address,
                       "' is not HOST:PORT (write IPv6 as [ADDR]:PORT)"));
    }
  }
  if (colon == absl::string_view::npos || colon + 1 == address.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "coordinator address '", address, "' has no port (HOST:PORT)"));
  }
  if (!has_host) {
    return absl::InvalidArgumentError(absl::StrCat(
        "coordinator address '", address, "' has no host (HOST:PORT)"));
  }
  const absl::string_view port = address.substr(colon + 1);
  int value = 0;
  if (!std::all_of(port.begin(), port.end(), absl::ascii_isdigit) ||
      !absl::SimpleAtoi(port, &value) || value < 1 || value > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("coordinator address '", address, "' has a bad port '",
                     port, "' (1 to 65535)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ParseCoordinatorList(
    absl::string_view list) {
  if (absl::StripAsciiWhitespace(list).empty()) {
    return absl::InvalidArgumentError("coordinator address is empty");
  }
  std::vector<std::string> addresses;
  for (absl::string_view entry : absl::StrSplit(list, ',')) {
    entry = absl::StripAsciiWhitespace(entry);
    if (entry.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("coordinator list '", list, "' has an empty entry"));
    }
    if (absl::Status s = CheckAddress(entry); !s.ok()) return s;
    if (std::find(addresses.begin(), addresses.end(), entry) !=
        addresses.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "coordinator list '", list, "' names '", entry, "' twice"));
    }
    addresses.emplace_back(entry);
  }
  return addresses;
}

}  // namespace zshard::net
