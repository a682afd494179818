// The process-wide logger behind common/logging.h: one mutex guards the
// configuration and the write, so lines never interleave.
#include "common/logging.h"

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <functional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "nlohmann/json.hpp"

namespace zshard {
namespace {

struct LoggerState {
  absl::Mutex mu;
  LogLevel level ABSL_GUARDED_BY(mu) = LogLevel::kInfo;
  LogFormat format ABSL_GUARDED_BY(mu) = LogFormat::kText;
  std::FILE* out ABSL_GUARDED_BY(mu) = stderr;
  std::map<std::string, std::string, std::less<>> context ABSL_GUARDED_BY(mu);
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

// A JSON value for field `key`: an integer for the numeric context keys
// when `value` is one, else the string.
nlohmann::ordered_json FieldValue(const std::string& key,
                                  const std::string& value) {
  int64_t n = 0;
  if ((key == "epoch" || key == "rank" || key == "step") &&
      absl::SimpleAtoi(value, &n)) {
    return n;
  }
  return value;
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

void SetLogOutput(std::FILE* out) {
  absl::MutexLock lock(&State().mu);
  State().out = out;
}

void SetLogContext(const std::map<std::string, std::string>& fields) {
  absl::MutexLock lock(&State().mu);
  State().context.clear();
  State().context.insert(fields.begin(), fields.end());
}

void SetLogContext(absl::string_view key, absl::string_view value) {
  absl::MutexLock lock(&State().mu);
  State().context[std::string(key)] = std::string(value);
}

void ClearLogContext(absl::string_view key) {
  absl::MutexLock lock(&State().mu);
  auto it = State().context.find(key);
  if (it != State().context.end()) State().context.erase(it);
}

void Log(LogLevel level, absl::string_view message,
         const std::map<std::string, std::string>& fields) {
  LoggerState& s = State();
  absl::MutexLock lock(&s.mu);
  if (level < s.level) return;
  std::string line;
  if (s.format == LogFormat::kJson) {
    // Ordered: time, level and msg first, as people read them.
    nlohmann::ordered_json j;
    j["time"] = Rfc3339Now();
    j["level"] = LevelName(level);
    j["msg"] = std::string(message);
    auto add = [&j](const std::string& k, const std::string& v) {
      if (k != "time" && k != "level" && k != "msg") j[k] = FieldValue(k, v);
    };
    for (const auto& [k, v] : s.context) add(k, v);
    for (const auto& [k, v] : fields) add(k, v);
    line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  } else {
    line = absl::StrCat(Rfc3339Now(), " ", LevelName(level), " ", message);
    for (const auto& [k, v] : s.context) {
      if (fields.count(k) == 0) absl::StrAppend(&line, " ", k, "=", v);
    }
    for (const auto& [k, v] : fields) absl::StrAppend(&line, " ", k, "=", v);
  }
  line.push_back('\n');
  std::fwrite(line.data(), 1, line.size(), s.out);
  std::fflush(s.out);
}

}  // namespace zshard
