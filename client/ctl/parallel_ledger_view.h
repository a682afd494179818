// zshardctl ledger's output for a model-parallel plan: per slot the bytes
// of its worst data-parallel rank in every stage, the worst slot of each
// stage, per worker its position, slot and bytes (summarised by slot in
// large worlds), and the fit verdict of ZeRO-1's worst slot; a table or
// JSON.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/plan/parallel_ledger.h"
#include "common/plan/parallel_plan.h"

namespace zshard::ctl {

// What the output shows; every pointer outlives the call.
struct ParallelLedgerView {
  std::string name;  // the model's, for the header
  const plan::ParallelModel* model = nullptr;
  const plan::ParallelPlan* plan = nullptr;
  const plan::ParallelLedger* ledger = nullptr;
  std::vector<plan::WorkerBytes> workers;  // every worker, by rank
  // The device's memory for the fit verdict; 0: none given (the verdict
  // then only names the worst slot and worker).
  int64_t device_bytes = 0;
};

// The ZeRO-1 fit line: "fit: ZeRO-1's worst worker is rank W in slot S (tp
// t, pp p): NEED per worker; ..." followed by "fits a DEVICE device with H
// to spare", "does not fit a DEVICE device (H short)" or, without a device,
// "give --device-gib G for a verdict". `where` names the worker (empty in a
// single-slot ledger: "rank W").
std::string FitLine(const std::string& where, int64_t need_bytes,
                    int64_t device_bytes);

std::string ParallelLedgerTables(const ParallelLedgerView& view);

// ParallelLedgerToJson's object plus "model" (the name),
// "workers": [{"rank", "replica", "tp", "pp", "cp", "slot", "dp_rank",
// "total_bytes": {"ddp", "zero1", "zero2", "zero3"}}] and "fit": {"stage":
// "zero1", "slot", "tp", "pp", "worker", "need_bytes", "device_bytes",
// "headroom_bytes", "fits"} (the last three null without a device).
std::string ParallelLedgerJson(const ParallelLedgerView& view);

}  // namespace zshard::ctl
