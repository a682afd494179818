// Log scanning for tests.

#include "tests/testing/log_scan.h"

#include <fstream>
#include <regex>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"
#include "tests/testing/wait_for.h"

namespace zshard::testing {

std::string ReadLog(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "";
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

bool LogContains(const std::string& path, const std::string& needle) {
  return ReadLog(path).find(needle) != std::string::npos;
}

std::optional<int> FindBoundPort(const std::string& path,
                                 const std::string& marker) {
  const std::string lower_marker = absl::AsciiStrToLower(marker);
  static const std::regex kHostPort(
      R"((\[[0-9a-fA-F:]*\]|[A-Za-z0-9_.\-]+):([0-9]{1,5})\b)");
  for (absl::string_view line : absl::StrSplit(ReadLog(path), '\n')) {
    std::string text(line);
    if (absl::AsciiStrToLower(text).find(lower_marker) == std::string::npos) {
      continue;
    }
    std::optional<int> port;
    for (auto it = std::sregex_iterator(text.begin(), text.end(), kHostPort);
         it != std::sregex_iterator(); ++it) {
      int value = std::stoi((*it)[2].str());
      if (value > 0 && value < 65536) port = value;
    }
    if (port.has_value()) return port;
  }
  return std::nullopt;
}

std::optional<int> WaitForBoundPort(const std::string& path, int64_t timeout_ms,
                                    const std::string& marker) {
  std::optional<int> port;
  WaitFor(
      [&] {
        port = FindBoundPort(path, marker);
        return port.has_value();
      },
      timeout_ms);
  return port;
}

}  // namespace zshard::testing
