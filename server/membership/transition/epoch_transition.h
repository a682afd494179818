// The two-phase epoch transition's records (docs/design.md section 6): the
// committed and stable epochs, the proposal in flight with its PREPARED
// acks, the last abandoned proposal, the ACTIVE acks and the commit-point
// resolution, driven through TransitionPhase's table.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/membership/transition/commit_point.h"
#include "server/membership/transition/transition_phase.h"
#include "server/state/types.h"

namespace zshard::server {

// What the transition did since this process started (for metrics).
struct TransitionCounts {
  int64_t proposals = 0;
  int64_t abandons = 0;
  int64_t commits = 0;
  // Stable epochs that moved state, the sum of their bytes_moved, and the
  // last one's duration (commit to the last ACTIVE ack).
  int64_t reshards = 0;
  int64_t reshard_bytes = 0;
  double last_reshard_seconds = 0;
};

// Thread-compatible: the membership calls it under its lock. Knows no
// members, clock or store: callers pass what it needs. Every step that
// changes the phase returns Internal (and changes nothing) when the table
// refuses it; callers only take steps their phase allows.
class EpochTransition {
 public:
  // Restores a transition read from the store: `committed` (epoch 0: none)
  // and whether it is stable, the last `stable` epoch and the next epoch
  // number to propose. The phase becomes kStable or kCommitted; nothing is
  // in flight.
  void Restore(EpochPlan committed, bool committed_stable, EpochPlan stable,
               int64_t next_epoch);
  // A proposal the restart interrupted: it becomes the last abandoned one.
  void RestoreAbandoned(EpochPlan plan) { abandoned_ = std::move(plan); }

  // Proposes `plan` (its epoch is next_epoch(), which grows by one); the
  // PREPARED acks start empty and the last abandoned proposal is forgotten.
  absl::Status Propose(EpochPlan plan);
  // Gives up the proposal with `why` as its reason and returns it; it
  // becomes the last abandoned one.
  absl::StatusOr<EpochPlan> Abandon(const std::string& why);

  // Records `worker_id`'s PREPARED ack for the proposal (the latest ack
  // wins). Returns true when every member the proposal needs acked: its
  // ranks and the ranks of the stable epoch for which `live` is true.
  bool AckPrepared(const std::string& worker_id, const PreparedAck& ack,
                   const std::function<bool(const std::string&)>& live);
  // The proposal with its resume point: the restore's step for a restore,
  // else ResolveCommitPoint over the acks, where acks of ranks of the
  // stable epoch are the holders when `holds_state` (otherwise every ack
  // is an "other"). FailedPrecondition from ResolveCommitPoint; Internal
  // with no proposal.
  absl::StatusOr<EpochPlan> ResolveCommit(bool holds_state) const;
  // `plan` (the resolved proposal) becomes the committed epoch, not yet
  // stable; its senders are the moves' member sources.
  absl::Status Commit(EpochPlan plan);

  // Records `worker_id`'s ACTIVE ack for the committed epoch. Returns true
  // when every rank of it acked.
  bool AckActive(const std::string& worker_id);
  // The committed epoch becomes the stable one, `duration_ms` after its
  // commit.
  absl::Status MarkStable(int64_t duration_ms);

  // OK when `epoch` is the committed epoch or the proposed one;
  // FailedPrecondition ("stale") otherwise.
  absl::Status CheckEpoch(int64_t epoch) const;

  TransitionPhase phase() const { return phase_; }
  // Epoch 0: none yet.
  // The rank of `worker_id` in the proposal (none: -1), the committed and
  // the stable epoch: O(1), unlike RankIn.
  int RankInProposal(const std::string& worker_id) const;
  int RankInCommitted(const std::string& worker_id) const;
  int RankInStable(const std::string& worker_id) const;

  const EpochPlan& committed() const { return committed_; }
  // The last stable epoch, the base of every proposal (epoch 0: none).
  const EpochPlan& stable() const { return stable_; }
  // Null when no proposal is in flight.
  const EpochPlan* proposal() const {
    return proposal_ ? &*proposal_ : nullptr;
  }
  // The last abandoned proposal while no newer one was made, or null.
  const EpochPlan* abandoned() const {
    return abandoned_ ? &*abandoned_ : nullptr;
  }
  bool committed_stable() const {
    return phase_ == TransitionPhase::kStable ||
           phase_ == TransitionPhase::kProposed;
  }
  // The epoch in transition: the proposal's, else the committed one until
  // it is stable, else 0.
  int64_t pending_epoch() const;
  // Whether `worker_id` acked PREPARED for the proposal, or ACTIVE for the
  // committed epoch.
  bool HasPrepared(const std::string& worker_id) const {
    return prepared_.count(worker_id) > 0;
  }
  bool HasActive(const std::string& worker_id) const {
    return active_acks_.count(worker_id) > 0;
  }
  // Members sending state in the committed epoch's moves (not yet stable).
  const std::set<std::string>& committed_senders() const {
    return committed_senders_;
  }
  int64_t next_epoch() const { return next_epoch_; }
  const TransitionCounts& counts() const { return counts_; }

 private:
  absl::Status Step(TransitionEvent event);

  TransitionPhase phase_ = TransitionPhase::kStable;
  EpochPlan committed_;
  EpochPlan stable_;
  std::optional<EpochPlan> proposal_;
  std::optional<EpochPlan> abandoned_;
  std::map<std::string, PreparedAck> prepared_;  // by worker id
  std::set<std::string> active_acks_;
  // Ranks by worker id of the proposal, the committed and the stable epoch,
  // and how many of the proposal's (committed epoch's) ranks acked.
  std::unordered_map<std::string, int> proposal_ranks_;
  std::unordered_map<std::string, int> committed_ranks_;
  std::unordered_map<std::string, int> stable_ranks_;
  int ranks_prepared_ = 0;
  int ranks_active_ = 0;
  std::set<std::string> committed_senders_;
  int64_t next_epoch_ = 1;
  TransitionCounts counts_;
};

}  // namespace zshard::server
