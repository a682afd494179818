// The live memory ledger of one rank: the planner's ZeRO-1 prediction per
// category next to the bytes the rank reports in its telemetry.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "common/plan/ledger.h"

namespace zshard::server {

// The ledger's categories, as keys of TelemetryReport.memory_bytes.
inline constexpr std::array<const char*, 5> kLedgerCategories = {
    "param", "grad", "master", "exp_avg", "exp_avg_sq"};

struct CategoryBytes {
  int64_t predicted = 0;
  int64_t measured = -1;  // -1: no telemetry
};

struct RankLedgerView {
  int rank = 0;
  std::string worker;  // name
  std::string worker_id;
  int64_t predicted_bytes = 0;
  int64_t measured_bytes = -1;  // -1: no telemetry
  std::map<std::string, CategoryBytes> categories;
  int64_t comm_bytes = 0;  // reported outside the ledger
};

// Joins `predicted` (the rank's ZeRO-1 figures) with `measured` (its latest
// memory_bytes; nullopt without telemetry). A category missing from
// `measured` counts as 0 bytes measured.
RankLedgerView MakeRankLedger(
    const plan::StageBytes& predicted,
    const std::optional<std::map<std::string, int64_t>>& measured);

}  // namespace zshard::server
