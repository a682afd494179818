// The coordinator addresses a client is given: "HOST:PORT" or a
// comma-separated list of them, one per coordinator of a high-availability
// setup (docs/design.md section 11).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace zshard::net {

// Splits `list` ("a:1,b:2,c:3"; spaces around an entry are ignored) into
// its addresses, in order. Each is HOST:PORT or [IPV6]:PORT with a port in
// 1..65535. InvalidArgument with one line naming the problem for an empty
// list, an empty entry, an address without a host or a port, a bad port or
// an address given twice.
absl::StatusOr<std::vector<std::string>> ParseCoordinatorList(
    absl::string_view list);

}  // namespace zshard::net
