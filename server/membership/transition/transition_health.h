// What the coordinator watches in a transition besides its records
// (EpochTransition): when the phase in flight began (its timeout's start),
// what broke the committed epoch, which sources the next proposal avoids,
// and how often transitions failed.
#pragma once

#include <cstdint>
#include <set>
#include <string>

namespace zshard::server {

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
  int64_t timeouts = 0;
  int64_t prepare_failures = 0;
};

}  // namespace zshard::server
