// Random identifiers: session tokens and worker ids.
#pragma once

#include <string>

#include "absl/strings/string_view.h"

namespace zshard::server {

// 128 random bits from the OS as 32 lower-case hex digits.
std::string NewToken();

// A worker id: "w-" and 64 random bits as hex.
std::string NewWorkerId();

// Compares two tokens in time independent of where they differ.
bool TokensEqual(absl::string_view a, absl::string_view b);

}  // namespace zshard::server
