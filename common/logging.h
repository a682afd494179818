// A small process-wide logger: one line per message on stderr, either as
// plain text or as JSON lines, with optional structured fields.
#pragma once

#include <map>
#include <string>

#include "absl/strings/string_view.h"

namespace zshard {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };
enum class LogFormat { kText, kJson };

// Configures the logger. Thread-safe; call from main() before logging.
void SetLogLevel(LogLevel level);
void SetLogFormat(LogFormat format);
// Fields added to every line (e.g. job, worker); replaces previous ones.
void SetLogContext(const std::map<std::string, std::string>& fields);

// Writes one line. Thread-safe; lines from different threads never interleave.
void Log(LogLevel level, absl::string_view message,
         const std::map<std::string, std::string>& fields = {});

}  // namespace zshard

#define ZSHARD_LOG_INFO(msg, ...) ::zshard::Log(::zshard::LogLevel::kInfo, (msg), ##__VA_ARGS__)
#define ZSHARD_LOG_WARN(msg, ...) ::zshard::Log(::zshard::LogLevel::kWarning, (msg), ##__VA_ARGS__)
#define ZSHARD_LOG_ERROR(msg, ...) ::zshard::Log(::zshard::LogLevel::kError, (msg), ##__VA_ARGS__)
#define ZSHARD_LOG_DEBUG(msg, ...) ::zshard::Log(::zshard::LogLevel::kDebug, (msg), ##__VA_ARGS__)
