// The reshard history: one line per transition (proposed, committed,
// stable, abandoned or broken), newest last, for the dashboard.
#pragma once

#include <deque>
#include <string>
#include <vector>

#include "server/state/checkpoint_types.h"
#include "server/state/types.h"

namespace zshard::server {

// Thread-compatible: the membership calls it under its lock.
class ReshardHistory {
 public:
  // Keeps the latest `capacity` transitions (at least 1).
  explicit ReshardHistory(int capacity) : capacity_(capacity) {}

  // Records or updates (in place) the line of `plan`'s epoch with
  // `outcome` ("in progress", "stable", "abandoned", "broken").
  void Record(const EpochPlan& plan, const std::string& outcome);
  // The latest `limit` lines (0: all kept), oldest first.
  std::vector<ReshardRecord> Latest(int limit) const;

 private:
  const int capacity_;
  std::deque<ReshardRecord> lines_;
};

}  // namespace zshard::server
