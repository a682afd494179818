// RenderReshardMetrics: the transition, failure and checkpoint families
// from MembershipStats.
#include "server/metrics/reshard_metrics.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace zshard::server {
namespace {

// HELP and TYPE lines of one family, then its sample unless `value` is
// empty.
void AppendFamily(std::string* out, const char* name, const char* type,
                  const char* help, const std::string& value) {
  absl::StrAppend(out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type,
                  "\n");
  if (!value.empty()) absl::StrAppend(out, name, " ", value, "\n");
}

}  // namespace

std::string RenderReshardMetrics(const MembershipStats& stats, int64_t now_ms) {
  const bool checkpointed = stats.last_checkpoint_ms > 0;
  std::string out;
  AppendFamily(&out, "zshard_reshards_total", "counter",
               "Re-shards that moved optimizer state and became stable.",
               absl::StrCat(stats.reshards));
  AppendFamily(&out, "zshard_reshard_bytes_total", "counter",
               "Optimizer state bytes moved by stable re-shards.",
               absl::StrCat(stats.reshard_bytes));
  AppendFamily(&out, "zshard_last_reshard_seconds", "gauge",
               "The latest re-shard's duration, from commit to the last "
               "ACTIVE ack.",
               absl::StrFormat("%.9g", stats.last_reshard_seconds));
  AppendFamily(&out, "zshard_checkpoints_total", "counter",
               "Checkpoints whose manifest was committed.",
               absl::StrCat(stats.checkpoints));
  AppendFamily(&out, "zshard_checkpoint_failures_total", "counter",
               "Rank checkpoint writes reported failed (each leaves its "
               "checkpoint incomplete).",
               absl::StrCat(stats.checkpoint_failures));
  AppendFamily(&out, "zshard_prepare_failures_total", "counter",
               "Committed epochs a member reported it could not prepare.",
               absl::StrCat(stats.prepare_failures));
  AppendFamily(&out, "zshard_transition_timeouts_total", "counter",
               "Transition phases given up after transition_timeout_ms.",
               absl::StrCat(stats.transition_timeouts));
  AppendFamily(&out, "zshard_isolated", "gauge",
               "1 while the coordinator is cut off from most members "
               "(isolation_fraction): it declares no one dead and waits.",
               stats.isolated ? "1" : "0");
  AppendFamily(&out, "zshard_link_failures_total", "counter",
               "Links between two members reported failed (each pair once an "
               "epoch).",
               absl::StrCat(stats.link_failures));
  AppendFamily(&out, "zshard_exclusions_total", "counter",
               "Members excluded because their link to a peer failed twice.",
               absl::StrCat(stats.exclusions));
  AppendFamily(&out, "zshard_failure_detection_seconds", "histogram",
               "Seconds from a peer's first report of a member to the "
               "proposal that followed its confirmed death.",
               "");
  const DetectionHistogram& d = stats.failure_detection;
  int64_t cumulative = 0;
  for (int i = 0; i <= DetectionHistogram::kBuckets; ++i) {
    cumulative += d.counts[i];
    const std::string le =
        i < DetectionHistogram::kBuckets
            ? absl::StrFormat("%g", DetectionHistogram::kBounds[i])
            : std::string("+Inf");
    absl::StrAppend(&out, "zshard_failure_detection_seconds_bucket{le=\"", le,
                    "\"} ", cumulative, "\n");
  }
  absl::StrAppend(&out, "zshard_failure_detection_seconds_sum ",
                  absl::StrFormat("%.6f", d.sum), "\n",
                  "zshard_failure_detection_seconds_count ", d.count, "\n");
  AppendFamily(&out, "zshard_checkpoint_step", "gauge",
               "The training step the newest committed checkpoint holds.",
               checkpointed ? absl::StrCat(std::max<int64_t>(
                                  0, stats.last_checkpoint_step))
                            : "");
  AppendFamily(
      &out, "zshard_checkpoint_age_seconds", "gauge",
      "Seconds since the newest checkpoint was committed.",
      checkpointed
          ? absl::StrFormat("%.3f", std::max<int64_t>(
                                        0, now_ms - stats.last_checkpoint_ms) /
                                        1000.0)
          : "");
  return out;
}

}  // namespace zshard::server
