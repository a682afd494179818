// What zshardctl's offline plan and ledger print in common for a
// model-parallel job: the header lines, a worker's position, the workers of
// a slot as a rank range, and when a world is summarised by slot.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/plan/parallel_ledger.h"
#include "common/plan/parallel_plan.h"
#include "nlohmann/json.hpp"

namespace zshard::ctl {

// The plan and its ledger, which plan and ledger both start from.
struct ParallelPlanAndLedger {
  plan::ParallelPlan plan;
  plan::ParallelLedger ledger;
};
absl::StatusOr<ParallelPlanAndLedger> PlanAndLedger(
    const plan::ParallelModel& model, const plan::ParallelPlanOptions& options);

// Worlds of more workers than this print one row per slot (the slot's
// workers as a rank range, their bytes' least and most) instead of one row
// per worker; JSON always lists every worker.
constexpr int kMaxWorkerRows = 64;

// "model NAME: P params (S over the slots) in T x P = N slots\n" then
// "parallel: tensor T  pipeline P  context C  world W = R replicas x T*P*C
// workers\n" and "data-parallel size R x C = N  instances I  shard group D
// = N / I\n"; "(unnamed)" for an empty name.
std::string ParallelHeader(const std::string& name,
                           const plan::ParallelLedger& ledger);

// The workers of slot `slot` in data-parallel rank order, as "A" (one),
// "A, B" (two) or "A, B, ..., Z" (an arithmetic run: stride T).
std::string SlotRanks(const plan::ParallelPlan& plan, int slot);

// "(tp t, pp p)".
std::string SlotLabel(const plan::ParallelSizes& sizes, int slot);

// {"rank", "replica", "tp", "pp", "cp", "slot", "dp_rank"} of `rank`.
nlohmann::ordered_json WorkerPositionJson(const plan::ParallelPlan& plan,
                                          int rank);

// The least and the most total bytes of stage `stage` over the workers of
// each slot, by slot index.
struct SlotRange {
  int64_t least = 0;
  int64_t most = 0;
};
std::vector<SlotRange> SlotRanges(const plan::ParallelPlan& plan,
                                  const std::vector<plan::WorkerBytes>& workers,
                                  plan::Stage stage);

// One row per slot of a large world: "slot", "tp", "pp", "workers" (their
// count), "ranks" (SlotRanks), and the least and most of `label` over the
// slot's workers (bytes); the table is preceded by one line saying why.
std::string WorkersBySlotTable(const plan::ParallelPlan& plan,
                               const std::vector<SlotRange>& ranges,
                               const std::string& label);

}  // namespace zshard::ctl
