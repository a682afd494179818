// The coordinator's members and their leases (docs/design.md section 6): one
// record per worker incarnation, the live incarnation of each name, join
// validation, session tokens, heartbeats, lease expiry and suspect checks.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/membership/members/isolation_guard.h"
#include "server/membership/members/lease_book.h"
#include "server/state/types.h"

namespace zshard::server {

struct JoinArgs {
  std::string name;
  std::string address;
  std::map<std::string, std::string> labels;
  DeviceInfo device;
};

// How long members may stay silent. Every field is in clock milliseconds.
struct LeasePolicy {
  // A live member silent for longer than this is DEAD.
  int64_t lease_timeout_ms = 0;
  // A suspect silent for longer than this is DEAD at once.
  int64_t suspect_window_ms = 0;
  // More than this fraction of the live members past their lease at once
  // is the coordinator's isolation (IsolationGuard). 1: never.
  double isolation_fraction = 1;
  // A suspect that does not heartbeat within this time after the report is
  // DEAD.
  int64_t suspect_grace_ms = 0;
};

// A live member whose lease or suspect grace ran out (see Expired).
struct Expiry {
  std::string worker_id;
  std::string change;  // "member w1's lease expired"
  std::string reason;  // why it is DEAD
  // Its lease ran out, and no peer's report of it was confirmed: the
  // silence alone judges it (see IsolationGuard).
  bool lease_expired = false;
};

// Thread-compatible: the membership calls it under its lock. Self-contained
// (no epochs, no store, no clock: callers pass the time). Lease bookkeeping
// lives behind a lock of its own: every member's MemberLease is in leases(),
// which heartbeats use without the membership's lock; the table mirrors
// each state and rank change into it.
class MemberTable {
 public:
  explicit MemberTable(LeasePolicy policy)
      : policy_(policy), isolation_(policy.isolation_fraction) {}

  // The leases of every member (thread-safe; lives as long as the table).
  LeaseBook* leases() { return &leases_; }
  // A copy of `m` with the live epoch and step of its lease, for the store
  // and the dashboard.
  static Member Copy(const Member& m);

  // InvalidArgument naming the field when `args` is malformed (empty or
  // non-printable name, over-long fields, too many labels).
  static absl::Status CheckJoinArgs(const JoinArgs& args);
  // `reason` cut to the longest reason kept.
  static std::string ClipReason(const std::string& reason);

  // Puts back `stored` members read from the store with their leases
  // re-armed at `now_ms` (one lease of grace) and no suspect check.
  void Restore(const std::vector<Member>& stored, int64_t now_ms);

  // A new JOINING incarnation of `args.name` with a fresh id and token,
  // heartbeating at `now_ms`; it becomes the name's live incarnation (the
  // caller fences an older one first). Returns it; valid until Forget.
  Member& Add(const JoinArgs& args, int64_t now_ms);

  // The session of `worker_id`: InvalidArgument for a missing or over-long
  // id, NotFound for an unknown one, Unauthenticated for a wrong token or a
  // DEAD/LEFT member.
  absl::StatusOr<Member*> Session(const std::string& worker_id,
                                  const std::string& token);

  // Null when unknown.
  Member* Find(const std::string& worker_id);
  const Member* Find(const std::string& worker_id) const;
  // The live incarnation of `name`, or null.
  Member* FindLive(const std::string& name);
  // True when `worker_id` is known and live.
  bool IsLiveId(const std::string& worker_id) const;
  // Live incarnations (one per name).
  size_t live_count() const { return live_by_name_.size(); }

  // Renews `m`'s lease at `now_ms` with its reported epoch and step; ends a
  // pending suspect check (the heartbeat path calls MemberLease::Renew).
  void Heartbeat(Member& m, int64_t epoch, int64_t step, int64_t now_ms);
  // `m` acked a transition at `step`: its step is at least that.
  void RaiseStep(Member& m, int64_t step);
  // The live step of `m` (reported or acked).
  static int64_t StepOf(const Member& m);
  // Every live member gets one lease of grace from `now_ms` (a restart or a
  // long pause of the coordinator: silence it could not hear is no death).
  void RearmLeases(int64_t now_ms);
  // The coordinator ticks at `now_ms`. When the previous tick (or the
  // first, which `gap_ms` = 0 records) came more than `gap_ms` > 0 ago, the
  // process was stopped or starved: every live member first gets one lease
  // of grace (RearmLeases). Returns that gap in ms (0: none).
  int64_t TickAfterPause(int64_t now_ms, int64_t gap_ms);
  // Whether the coordinator is cut off from most members (Expired's lease
  // expiries against the live count, once a tick).
  IsolationGuard& isolation() { return isolation_; }
  const IsolationGuard& isolation() const { return isolation_; }
  // `m` stops counting: `state` (DEAD or LEFT) with `reason`. False (and
  // nothing changes) when it was not live.
  bool MarkGone(Member& m, MemberState state, const std::string& reason);
  // `m` hands over its state before it leaves: DRAINING with `reason`.
  void MarkDraining(Member& m, const std::string& reason);
  // Every JOINING member becomes SPARE; returns their ids.
  std::vector<std::string> JoiningToSpare();
  // Places every member by `rank_of` (its rank in a newly committed epoch,
  // -1: none): ranked members are ACTIVE, unranked JOINING or ACTIVE ones
  // SPARE, others keep their state. Returns the ids that changed.
  std::vector<std::string> Place(
      const std::function<int(const std::string&)>& rank_of);

  // How long `m` has been silent at `now_ms`.
  int64_t SilenceMs(const Member& m, int64_t now_ms) const;
  // True when a report against `m` confirms it at once: silent longer than
  // the suspect window.
  bool SilentTooLong(const Member& m, int64_t now_ms) const {
    return SilenceMs(m, now_ms) > policy_.suspect_window_ms;
  }
  // Live members silent longer than the suspect window at `now_ms`.
  int SilentCount(int64_t now_ms) const;
  // Starts `m`'s suspect grace at `now_ms`. False when one runs already.
  bool MarkSuspect(Member& m, int64_t now_ms);
  // Live members whose lease expired or whose suspect grace ran out at
  // `now_ms`, by worker id.
  std::vector<Expiry> Expired(int64_t now_ms) const;

  // Forgets the oldest DEAD/LEFT members (by join order) for which
  // `pinned` is false, beyond `max_gone`. Returns their ids.
  std::vector<std::string> Forget(
      int max_gone, const std::function<bool(const std::string&)>& pinned);

  // Every member by worker id.
  const std::map<std::string, Member>& all() const { return members_; }
  // The join sequence number the next Add uses.
  int64_t next_join_seq() const { return next_join_seq_; }
  void set_next_join_seq(int64_t seq) { next_join_seq_ = seq; }
  const LeasePolicy& policy() const { return policy_; }
  // Members in DRAINING, by id.
  const std::set<std::string>& draining() const { return draining_; }

 private:
  // Sets m's state and its lease's, keeping draining_.
  void SetState(Member& m, MemberState state);
  void NewLease(Member& m, int64_t now_ms);

  const LeasePolicy policy_;
  LeaseBook leases_;
  std::set<std::string> draining_;
  std::map<std::string, Member> members_;  // by id
  std::map<std::string, std::string> live_by_name_;
  int64_t next_join_seq_ = 1;
  // The clock at the last tick (-1: none yet).
  int64_t last_tick_ms_ = -1;
  IsolationGuard isolation_;
};

}  // namespace zshard::server
