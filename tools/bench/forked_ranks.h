// Benchmark ranks as forked processes: each runs its part and reports back
// over a pipe, and the parent gathers the reports in rank order.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace zshard::bench {

// What one rank measured: a label (e.g. the transport it used; one word, no
// spaces, may be empty) and its times in seconds.
struct RankReport {
  std::string label;
  std::vector<double> times;
};

// Forks `ranks` processes; process r runs body(r), sends its report (or its
// error) to the parent and exits. Call only before this process starts
// threads or after it joined them. Returns the reports in rank order, or
// Unavailable naming the first rank whose process failed or did not report.
absl::StatusOr<std::vector<RankReport>> RunForkedRanks(
    int ranks, const std::function<absl::StatusOr<RankReport>(int)>& body);

// The median over iterations i in [0, count) of the slowest rank's time
// times[rank][first + i]. `times` must be non-empty with count > 0.
double MedianOfSlowest(const std::vector<std::vector<double>>& times,
                       size_t first, size_t count);

}  // namespace zshard::bench
