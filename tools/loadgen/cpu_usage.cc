// ProcessCpuSeconds: /proc/<pid>/stat parsing.

#include "tools/loadgen/cpu_usage.h"

#include <unistd.h>

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/file_io.h"

namespace zshard::loadgen {

absl::StatusOr<double> ParseProcStatCpuSeconds(absl::string_view stat,
                                               long ticks_per_second) {
  size_t close = stat.rfind(')');
  if (close == absl::string_view::npos || ticks_per_second <= 0) {
    return absl::InvalidArgumentError("proc stat has no command field");
  }
  // After ") " come fields 3 (state), 4, ...; utime is field 14.
  std::vector<absl::string_view> fields =
      absl::StrSplit(stat.substr(close + 1), ' ', absl::SkipEmpty());
  int64_t utime = 0;
  int64_t stime = 0;
  if (fields.size() < 13 || !absl::SimpleAtoi(fields[11], &utime) ||
      !absl::SimpleAtoi(fields[12], &stime)) {
    return absl::InvalidArgumentError("proc stat cpu fields are malformed");
  }
  return static_cast<double>(utime + stime) /
         static_cast<double>(ticks_per_second);
}

absl::StatusOr<double> ProcessCpuSeconds(pid_t pid) {
  const std::string path =
      pid == 0 ? "/proc/self/stat" : absl::StrCat("/proc/", pid, "/stat");
  auto stat = ReadFile(path);
  if (!stat.ok()) {
    return absl::NotFoundError(absl::StrCat("process ", pid, " not found"));
  }
  return ParseProcStatCpuSeconds(*stat, sysconf(_SC_CLK_TCK));
}

}  // namespace zshard::loadgen
