// What a membership change shows the world, and when (docs/design.md
// section 6): the change's store batch, the group-commit writer that makes
// it durable, and the gates that hold the change's heartbeat facts, events
// and plan updates back until that write is durable, then show them in the
// one order that holds: facts and events first, then plan updates (a
// worker told of an epoch may heartbeat with it at once).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/events/event_log.h"
#include "server/membership/members/member_table.h"
#include "server/membership/publish/durable_gate.h"
#include "server/membership/publish/plan_update_log.h"
#include "server/membership/publish/store_batch.h"
#include "server/membership/publish/store_writer.h"
#include "server/membership/transition/epoch_transition.h"
#include "server/state/state_store.h"
#include "server/state/types.h"

namespace zshard::server {

// The facts a heartbeat answers with, copied from the state machine at the
// end of every change.
struct HeartbeatFacts {
  int64_t committed_epoch = 0;
  int64_t pending_epoch = 0;
  int64_t next_epoch = 1;
  bool failed = false;
  bool finished = false;
  bool committed_broken = false;
  std::string failure_reason;
  // Why no world can form now (empty when one can), and the committed
  // world's size: what a waiting member is told.
  std::string unviable;
  int committed_world = 0;
};

struct PublisherOptions {
  // Plan updates kept for watchers that fall behind.
  int update_log_size = 64;
  // Events kept in memory.
  int event_log_size = 4096;
};

// The staging methods (Batch, StageFacts, RecordEvent, Publish, Snapshot,
// Flush, last_ticket) are thread-compatible: the membership calls them
// under its own lock, one change at a time. Facts, WaitApplied, Retry,
// Wait, Shutdown, events and writer_stats are thread-safe.
class Publisher {
 public:
  // `store` may be null (memory only). `stage_facts` stages the caller's
  // current heartbeat facts (through StageFacts); it is called before every
  // plan update is published, since an update's epoch must be one that
  // heartbeats accept.
  Publisher(StateStore* store, PublisherOptions options,
            std::function<void()> stage_facts);
  Publisher(const Publisher&) = delete;
  Publisher& operator=(const Publisher&) = delete;

  // Events loaded from the store at start, shown at once.
  void RestoreEvents(std::vector<Event> recent);

  // The writes the change in progress staged.
  StoreBatch& batch() { return batch_; }

  // Stages `facts` to be shown once the change is durable.
  void StageFacts(HeartbeatFacts facts);
  // The facts shown last; never null. Lock-free: a heartbeat never waits
  // for a thread that shows facts or events.
  std::shared_ptr<const HeartbeatFacts> Facts() const;

  // Records event `kind` of `epoch`: logged now, stored with the change,
  // shown once it is durable.
  void RecordEvent(const std::string& kind, const std::string& reason,
                   int64_t epoch);

  // Publishes `plan` in `phase` to the watchers. An abandonment waits for
  // the end of its change: a proposal in the same change replaces it.
  // Watchers never see an abandonment followed by a proposal in one change:
  // a worker resumes on ABANDONED, and one that falls behind gets only the
  // latest state (the proposal) and stays paused, so the first would step
  // alone.
  void Publish(PlanPhase phase, const EpochPlan& plan,
               const EpochTransition& transition);
  // The watchers' snapshot after a restore.
  void Snapshot(const EpochTransition& transition);

  // Ends a change: publishes a held abandonment, stages the facts, queues
  // the batch for the store writer and seals what the change staged to be
  // shown once that batch is durable. The change's caller then waits with
  // WaitApplied(last_ticket()) after releasing its lock.
  void Flush(const MemberTable& members, const EpochTransition& transition);
  // The ticket of the last write queued (0: none).
  int64_t last_ticket() const { return last_ticket_; }
  // Waits until the writes up to `ticket` are durable (or failed and
  // queued for a retry).
  void WaitApplied(int64_t ticket) { writer_.WaitApplied(ticket); }
  // Writes again what a failed store write left queued.
  void Retry() { writer_.Retry(); }

  // Plan updates after `after_seq` (0: a snapshot). Blocks up to `timeout`
  // when there are none; returns early with shutdown set after Shutdown().
  WatchBatch Wait(int64_t after_seq, absl::Duration timeout) {
    return updates_.Wait(after_seq, timeout);
  }
  // Wakes every waiter of plan updates and events.
  void Shutdown();

  // Every event shown, numbered; lives as long as this.
  EventLog* events() { return &events_; }
  StoreWriter::Stats writer_stats() { return writer_.stats(); }

 private:
  // How PassGates moves the gates: Seal what was staged under a new
  // ticket, or Release what waited for tickets now durable.
  enum class GateStep { kSeal, kRelease };
  void PublishAbandon(const EpochTransition& transition);
  // The StoreWriter's tickets up to `durable` are durable.
  void OnDurable(int64_t durable);
  void PassGates(GateStep step, int64_t ticket);
  // Shows `facts` (the latest wins) and `events`.
  void ShowLocked(std::vector<HeartbeatFacts> facts, std::vector<Event> events)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(shown_mu_);

  const std::function<void()> stage_facts_;
  StoreBatch batch_;
  int64_t last_ticket_ = 0;
  // The seq of the last event recorded (shown or staged).
  int64_t last_event_seq_ = 0;
  // The abandonment this change published, held until its end.
  std::optional<EpochPlan> unpublished_abandon_;
  // Order: the caller's lock, then shown_mu_, then the logs' own locks.
  absl::Mutex shown_mu_;
  // Written under shown_mu_ (std::atomic_store), read without it.
  std::shared_ptr<const HeartbeatFacts> facts_ =
      std::make_shared<const HeartbeatFacts>();
  DurableGate<HeartbeatFacts> facts_gate_ ABSL_GUARDED_BY(shown_mu_);
  DurableGate<Event> event_gate_ ABSL_GUARDED_BY(shown_mu_);
  PlanUpdateLog updates_;
  EventLog events_;
  // Last: its thread calls OnDurable, which uses everything above.
  StoreWriter writer_;
};

}  // namespace zshard::server
