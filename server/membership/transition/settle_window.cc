// The settle window's bookkeeping.
#include "server/membership/transition/settle_window.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace zshard::server {

void SettleWindow::Change(std::string reason, int64_t now_ms) {
  reason_ = std::move(reason);
  last_ms_ = now_ms;
  if (since_ms_ < 0) since_ms_ = now_ms;
  ++changes_;
}

bool SettleWindow::Settling(int64_t now_ms, int64_t settle_ms,
                            int64_t max_windows) const {
  if (settle_ms <= 0 || since_ms_ < 0) return false;
  return now_ms - last_ms_ < settle_ms &&
         now_ms - since_ms_ < max_windows * settle_ms;
}

bool SettleWindow::Close() {
  if (since_ms_ < 0) return false;
  gathered_ = changes_;
  since_ms_ = -1;
  changes_ = 0;
  return true;
}

std::string SettleWindow::ProposalReason() const {
  if (gathered_ <= 1) return reason_;
  return absl::StrCat(reason_, " (with ", gathered_ - 1,
                      " more changes gathered into this proposal)");
}

std::string SettleWindow::TakeProposalReason() {
  std::string reason = ProposalReason();
  gathered_ = 0;
  return reason;
}

}  // namespace zshard::server
