// MakeRankLedger: predicted next to measured.
#include "server/views/measured_ledger.h"

namespace zshard::server {

RankLedgerView MakeRankLedger(
    const plan::StageBytes& predicted,
    const std::optional<std::map<std::string, int64_t>>& measured) {
  const int64_t figures[] = {predicted.param_bytes, predicted.grad_bytes,
                             predicted.master_bytes, predicted.exp_avg_bytes,
                             predicted.exp_avg_sq_bytes};
  RankLedgerView v;
  if (measured.has_value()) v.measured_bytes = 0;
  for (size_t i = 0; i < kLedgerCategories.size(); ++i) {
    CategoryBytes& c = v.categories[kLedgerCategories[i]];
    c.predicted = figures[i];
    v.predicted_bytes += figures[i];
    if (!measured.has_value()) continue;
    auto it = measured->find(kLedgerCategories[i]);
    c.measured = it == measured->end() ? 0 : it->second;
    v.measured_bytes += c.measured;
  }
  if (measured.has_value()) {
    auto it = measured->find("comm");
    if (it != measured->end()) v.comm_bytes = it->second;
  }
  return v;
}

}  // namespace zshard::server
