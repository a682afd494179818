// HOST:PORT addresses of the coordinator's listeners: parsed, joined (IPv6
// hosts in brackets) and advertised (a wildcard host named by the
// machine's hostname).
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace zshard::server {

struct HostPort {
  std::string host;  // without brackets
  int port = 0;
};

// Splits "host:port" at the last colon (brackets around the host are
// removed). InvalidArgument naming the address when it is not HOST:PORT
// with a port in [0, 65535].
absl::StatusOr<HostPort> ParseHostPort(const std::string& address);

// "host:port", the host in brackets when it has a colon (IPv6).
std::string JoinHostPort(const std::string& host, int port);

// The address a listener bound on `host` at `port` is reached at: the
// machine's hostname in place of an empty or wildcard host (0.0.0.0, ::).
std::string AdvertisedAddress(const std::string& host, int port);

}  // namespace zshard::server
