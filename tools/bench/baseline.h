// Runs a baseline program (../shared/baselines, Debian's python3-torch) in
// the same run as zshard's own benchmark and reads the JSON it prints.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace zshard::bench {

// Runs `command` through the shell and returns the last JSON object it
// printed on stdout. Unavailable when it cannot start or exits non-zero,
// Internal when it printed no JSON object. Blocks until it exits.
absl::StatusOr<nlohmann::json> RunJsonCommand(const std::string& command);

}  // namespace zshard::bench
