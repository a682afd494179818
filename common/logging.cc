#include "common/logging.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "nlohmann/json.hpp"

namespace zshard {
namespace {

struct LoggerState {
  absl::Mutex mu;
  LogLevel level ABSL_GUARDED_BY(mu) = LogLevel::kInfo;
  LogFormat format ABSL_GUARDED_BY(mu) = LogFormat::kText;
  std::map<std::string, std::string> context ABSL_GUARDED_BY(mu);
};

LoggerState& State() {
  static LoggerState* state = new LoggerState();  // never destroyed
  return *state;
}

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarning:
      return "warning";
    case LogLevel::kError:
      return "error";
  }
  return "info";
}

std::string Rfc3339Now() {
  auto now = std::chrono::system_clock::now();
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                now.time_since_epoch())
                .count() %
            1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  char out[48];
  std::snprintf(out, sizeof(out), "%s.%03dZ", buf, static_cast<int>(ms));
  return out;
}

}  // namespace

void SetLogLevel(LogLevel level) {
  absl::MutexLock lock(&State().mu);
  State().level = level;
}

void SetLogFormat(LogFormat format) {
  absl::MutexLock lock(&State().mu);
  State().format = format;
}

void SetLogContext(const std::map<std::string, std::string>& fields) {
  absl::MutexLock lock(&State().mu);
  State().context = fields;
}

void Log(LogLevel level, absl::string_view message,
         const std::map<std::string, std::string>& fields) {
  LoggerState& s = State();
  absl::MutexLock lock(&s.mu);
  if (level < s.level) return;
  std::string line;
  if (s.format == LogFormat::kJson) {
    nlohmann::json j;
    j["time"] = Rfc3339Now();
    j["level"] = LevelName(level);
    j["msg"] = std::string(message);
    for (const auto& [k, v] : s.context) j[k] = v;
    for (const auto& [k, v] : fields) j[k] = v;
    line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  } else {
    line = absl::StrCat(Rfc3339Now(), " ", LevelName(level), " ", message);
    for (const auto& [k, v] : s.context) absl::StrAppend(&line, " ", k, "=", v);
    for (const auto& [k, v] : fields) absl::StrAppend(&line, " ", k, "=", v);
  }
  line.push_back('\n');
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

}  // namespace zshard
