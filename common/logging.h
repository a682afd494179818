// A small process-wide logger: one line per message on stderr, either as
// plain text or as JSON lines (--log-format=json), with structured fields
// and context fields (job, epoch, worker, rank) added to every line.
#pragma once

#include <cstdio>
#include <map>
#include <string>

#include "absl/strings/string_view.h"

namespace zshard {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };
enum class LogFormat { kText, kJson };

// Configures the logger. Thread-safe; call from main() before logging.
void SetLogLevel(LogLevel level);
void SetLogFormat(LogFormat format);
// Where lines go (default: stderr). `out` must stay open while it is set;
// set stderr back before closing it. Thread-safe.
void SetLogOutput(std::FILE* out);

// Context fields added to every line (e.g. job, worker). Thread-safe.
// The map form replaces every context field; the key/value form adds or
// replaces one; ClearLogContext removes one (no-op when absent).
void SetLogContext(const std::map<std::string, std::string>& fields);
void SetLogContext(absl::string_view key, absl::string_view value);
void ClearLogContext(absl::string_view key);

// Writes one line: time (RFC 3339, UTC, milliseconds), level, message,
// the context fields, then `fields` (a field overrides a context field of
// the same key). JSON lines are one object each: {"time", "level", "msg",
// ...fields} in that order (fields named time, level or msg are dropped);
// the values of "epoch", "rank" and "step" are written as integers when
// they are ones, every other value as a string. Thread-safe;
// lines from different threads never interleave.
void Log(LogLevel level, absl::string_view message,
         const std::map<std::string, std::string>& fields = {});

}  // namespace zshard

#define ZSHARD_LOG_INFO(msg, ...) \
  ::zshard::Log(::zshard::LogLevel::kInfo, (msg), ##__VA_ARGS__)
#define ZSHARD_LOG_WARN(msg, ...) \
  ::zshard::Log(::zshard::LogLevel::kWarning, (msg), ##__VA_ARGS__)
#define ZSHARD_LOG_ERROR(msg, ...) \
  ::zshard::Log(::zshard::LogLevel::kError, (msg), ##__VA_ARGS__)
#define ZSHARD_LOG_DEBUG(msg, ...) \
  ::zshard::Log(::zshard::LogLevel::kDebug, (msg), ##__VA_ARGS__)
