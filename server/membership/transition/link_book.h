// Links between members that failed (docs/operations.md, "Network faults"):
// a failed preparation or step that names the peer it could not reach
// counts against that pair of members; a pair that failed twice has one
// end excluded: it stays a spare, kept out of any world with the other end
// for the job's link_quarantine_ms. A broken link is thus routed around
// instead of re-proposing the same world forever.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>

namespace zshard::server {

struct Quarantine {
  std::string peer;  // the worker id it is kept apart from
  std::string peer_name;
  int64_t until_ms = 0;
  std::string reason;
};

// Thread-compatible: the membership calls it under its lock.
class LinkBook {
 public:
  // The link between members `a` and `b` (worker ids) failed in `epoch`.
  // Each epoch counts once per pair, whichever end reported it. Returns
  // the pair's count, and whether this report was new (worth an event).
  std::pair<int, bool> Record(const std::string& a, const std::string& b,
                              int64_t epoch);
  // The end of the pair (a, b) to exclude: the one named in the most
  // distinct failing pairs; on a tie, the one whose replacement moves fewer
  // bytes (`moved(id)`: its shard's state bytes, 0 for a spare); then
  // `later(a, b)` (true when a joined after b: the later joiner goes).
  std::string ChooseEnd(
      const std::string& a, const std::string& b,
      const std::function<int64_t(const std::string&)>& moved,
      const std::function<bool(const std::string&, const std::string&)>& later)
      const;
  // `excluded` is kept out of any world with `q.peer` until `q.until_ms`;
  // the pair's count starts again.
  void Exclude(const std::string& excluded, Quarantine q);

  // The quarantine of `id` in force at `now_ms`, or null.
  const Quarantine* QuarantineOf(const std::string& id, int64_t now_ms) const;
  // Every pair's count starts again (an epoch became stable: the links of
  // its members work). Quarantines stay.
  void ClearCounts() { counts_.clear(); }
  // `id` is gone for good: its counts and quarantine are dropped.
  void Forget(const std::string& id);
  int64_t failures() const { return failures_; }
  int64_t exclusions() const { return exclusions_; }

 private:
  using Pair = std::pair<std::string, std::string>;  // ordered
  static Pair Key(const std::string& a, const std::string& b);

  struct Count {
    int failures = 0;
    int64_t last_epoch = 0;
  };
  std::map<Pair, Count> counts_;
  std::map<std::string, Quarantine> quarantined_;  // by excluded id
  int64_t failures_ = 0;
  int64_t exclusions_ = 0;
};

}  // namespace zshard::server
