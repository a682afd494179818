// HOST:PORT parsing and advertising.
#include "server/host_port.h"

#include <unistd.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace zshard::server {

absl::StatusOr<HostPort> ParseHostPort(const std::string& address) {
  HostPort out;
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(address.substr(colon + 1), &out.port) || out.port < 0 ||
      out.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("address '", address, "' is not HOST:PORT"));
  }
  out.host = address.substr(0, colon);
  if (out.host.size() > 2 && out.host.front() == '[' &&
      out.host.back() == ']') {
    out.host = out.host.substr(1, out.host.size() - 2);
  }
  return out;
}

std::string JoinHostPort(const std::string& host, int port) {
  return absl::StrCat(
      host.find(':') != std::string::npos ? absl::StrCat("[", host, "]") : host,
      ":", port);
}

std::string AdvertisedAddress(const std::string& host, int port) {
  if (!host.empty() && host != "0.0.0.0" && host != "::") {
    return JoinHostPort(host, port);
  }
  char name[256] = {0};
  return JoinHostPort(
      gethostname(name, sizeof(name) - 1) == 0 ? name : "localhost", port);
}

}  // namespace zshard::server
