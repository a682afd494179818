// The coordinator's own isolation (docs/operations.md, "Network faults"):
// when most live members fall silent past their lease at once, the
// coordinator more likely lost its links to them than they all died, and
// training needs no coordinator between epochs. So it declares no one dead
// and waits; once most are back, the ones still silent get one more lease
// before they are judged as usual. The Kubernetes node controller stops
// evicting in a mostly unhealthy zone for the same reason.
#pragma once

#include <cstdint>

namespace zshard::server {

// Thread-compatible: the membership calls it under its lock, once a tick.
class IsolationGuard {
 public:
  // `fraction` in (0, 1]: a lease running out while more than fraction x
  // live members (with at least kMinLive live) are silent begins an
  // isolation; 1 never does. Silent: no heartbeat for longer than the
  // suspect window (two heartbeat intervals), so members whose leases run
  // out a few ticks apart count together.
  explicit IsolationGuard(double fraction) : fraction_(fraction) {}

  // The fewest live members for which silence of most of them means
  // isolation: with one or two, the coordinator cannot tell.
  static constexpr int kMinLive = 3;

  enum class Step {
    kNone,     // not isolated: expired members are dead as usual
    kStarted,  // isolation began at this tick: declare no one dead
    kHeld,     // still isolated: declare no one dead
    kEnded,    // most are back: every live member gets one lease of grace
  };
  // At `now_ms`, `lapsed` members are past their lease and `silent` of
  // `live` members are silent. An isolation begins when a lease ran out
  // while most are silent, and ends once most are heard again.
  Step Check(int lapsed, int silent, int live, int64_t now_ms);

  bool isolated() const { return since_ms_ >= 0; }
  // When the isolation began (-1: not isolated).
  int64_t since_ms() const { return since_ms_; }

 private:
  const double fraction_;
  int64_t since_ms_ = -1;
};

}  // namespace zshard::server
