// Reading a child's log file: find a line, or the port a server says it
// bound (servers started with port 0 print their real address).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace zshard::testing {

// The whole file, or "" when it cannot be read.
std::string ReadLog(const std::string& path);

// True when the file contains `needle`.
bool LogContains(const std::string& path, const std::string& needle);

// Scans the first line of `path` that contains `marker` (case-insensitive,
// e.g. "listening") for the last "HOST:PORT" on it and returns PORT; nullopt
// while no such line exists yet.
std::optional<int> FindBoundPort(const std::string& path,
                                 const std::string& marker = "listening");

// Waits up to `timeout_ms` for FindBoundPort to succeed.
std::optional<int> WaitForBoundPort(const std::string& path, int64_t timeout_ms,
                                    const std::string& marker = "listening");

}  // namespace zshard::testing
