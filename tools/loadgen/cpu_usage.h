// CPU time of a process from /proc/<pid>/stat, to report the coordinator's
// (and the load generator's own) CPU use over a measurement window.
#pragma once

#include <sys/types.h>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace zshard::loadgen {

// User + system CPU seconds consumed so far by `pid` (0: this process).
// NotFound when the process does not exist.
absl::StatusOr<double> ProcessCpuSeconds(pid_t pid);

// Parses the contents of /proc/<pid>/stat: fields 14 (utime) and 15
// (stime), in clock ticks, after the parenthesised command name (which may
// contain spaces). InvalidArgument when malformed.
absl::StatusOr<double> ParseProcStatCpuSeconds(absl::string_view stat,
                                               long ticks_per_second);

}  // namespace zshard::loadgen
