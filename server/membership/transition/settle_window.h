// The settle window of coalesced transitions (docs/design.md section 6):
// membership changes that arrive close together (a join storm, a rack
// lost, a rolling restart) open a window, and the coordinator proposes once
// no change came for the job's transition_settle_ms, or max_windows x
// transition_settle_ms after the window opened, so a storm of N changes
// costs one proposal instead of N.
#pragma once

#include <cstdint>
#include <string>

namespace zshard::server {

// Thread-compatible: the membership calls it under its lock.
class SettleWindow {
 public:
  // A change happened at `now_ms` for `reason`: opens the window, or
  // extends the open one.
  void Change(std::string reason, int64_t now_ms);
  // What changed last (the reason a proposal gives).
  const std::string& reason() const { return reason_; }
  // Sets the reason without opening a window (a transition that broke).
  void set_reason(std::string reason) { reason_ = std::move(reason); }

  // True while changes are still settling at `now_ms`: the last came less
  // than `settle_ms` ago and the window opened less than `max_windows` x
  // `settle_ms` ago. Never with `settle_ms` <= 0 or no window open.
  bool Settling(int64_t now_ms, int64_t settle_ms, int64_t max_windows) const;
  // Closes the open window: its changes are what the next proposal
  // answers. False when none was open.
  bool Close();

  // The reason a proposal gives: the last change, and how many more were
  // gathered with it.
  std::string ProposalReason() const;
  // The same, for the proposal made now: the next one starts counting
  // afresh.
  std::string TakeProposalReason();

 private:
  std::string reason_;
  // When the window's first and last change came (-1: no window open).
  int64_t since_ms_ = -1;
  int64_t last_ms_ = -1;
  // Changes in the open window, and in the last one closed.
  int64_t changes_ = 0;
  int64_t gathered_ = 0;
};

}  // namespace zshard::server
