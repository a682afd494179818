// What the coordinator watches in a transition besides its records
// (EpochTransition): when the phase in flight began (its timeout's start),
// what broke the committed epoch, which sources the next proposal avoids,
// and how often transitions failed.
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include "server/membership/transition/link_book.h"

namespace zshard::server {

// Seconds from a peer's first report of a member to the proposal that
// followed its confirmed death, in fixed buckets (Prometheus histogram).
struct DetectionHistogram {
  static constexpr double kBounds[] = {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
  static constexpr int kBuckets = sizeof(kBounds) / sizeof(kBounds[0]);
  // counts[i]: observations <= kBounds[i] (not cumulative); counts[kBuckets]:
  // the rest.
  int64_t counts[kBuckets + 1] = {};
  int64_t count = 0;
  double sum = 0;
  void Observe(double seconds) {
    int i = 0;
    while (i < kBuckets && seconds > kBounds[i]) ++i;
    ++counts[i];
    ++count;
    sum += seconds;
  }
};

// A training step that failed in a stable epoch, as a member reported it.
struct StepFailure {
  int64_t epoch = 0;  // 0: none reported
  int64_t step = 0;
  int64_t at_ms = 0;
  std::string reporter;
  std::string error;
};

// Plain data: the membership reads and writes it under its lock
// (transition.cc, transition_failures.cc, worker_reports.cc).
struct TransitionHealth {
  // When the phase in flight began (the proposal was made, the epoch
  // committed, or this process restored it): its timeout's start.
  int64_t phase_since_ms = 0;
  // A ranked member of the committed epoch is no longer healthy, or the
  // epoch can never become stable: heartbeats tell its ranks to abort.
  bool committed_broken = false;
  // The committed epoch that can never become stable (0: none).
  int64_t failed_epoch = 0;
  // Live members whose moves failed as sources since the last stable
  // epoch: the next proposals plan from other holders where there are any.
  std::set<std::string> avoid_sources;
  // The latest step failure reported in a stable epoch, and the stable
  // epoch it broke (0: none).
  StepFailure step_failure;
  int64_t step_failed_epoch = 0;
  // Proposals abandoned because a later change altered their world,
  // phases given up for a timeout, and epochs a member could not prepare.
  int64_t superseded = 0;
  // The first report of a member whose death was confirmed since the last
  // proposal (-1: none), and the detection times observed.
  int64_t reported_since_ms = -1;
  DetectionHistogram detection;
  // Failed links between members and the quarantines of excluded ones.
  LinkBook links;
  // Epochs broken in a row since the last stable one, and the earliest
  // time the next proposal may come (the back-off).
  int breaks_in_row = 0;
  int64_t retry_at_ms = 0;
  int64_t timeouts = 0;
  int64_t prepare_failures = 0;
};

}  // namespace zshard::server
