// The publisher: staging a change's facts, events and plan updates, and
// showing them once the change's store write is durable.
#include "server/membership/publish/publisher.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/logging.h"

namespace zshard::server {

Publisher::Publisher(StateStore* store, PublisherOptions options,
                     std::function<void()> stage_facts)
    : stage_facts_(std::move(stage_facts)),
      batch_(store),
      updates_(options.update_log_size),
      events_(EventLogOptions{options.event_log_size}),
      writer_(store, [this](int64_t durable) { OnDurable(durable); }) {}

void Publisher::RestoreEvents(std::vector<Event> recent) {
  for (Event& e : recent) events_.Append(std::move(e));
  last_event_seq_ = events_.last_seq();
}

void Publisher::StageFacts(HeartbeatFacts facts) {
  absl::MutexLock lock(&shown_mu_);
  facts_gate_.Stage(std::move(facts));
}

std::shared_ptr<const HeartbeatFacts> Publisher::Facts() const {
  return std::atomic_load(&facts_);
}

void Publisher::RecordEvent(const std::string& kind, const std::string& reason,
                            int64_t epoch) {
  Event e{WallTimeMs(), epoch, kind, reason};
  e.seq = ++last_event_seq_;
  ZSHARD_LOG_INFO(absl::StrCat(kind, ": ", reason),
                  {{"epoch", absl::StrCat(epoch)}});
  batch_.AddEvent(e);
  absl::MutexLock lock(&shown_mu_);
  event_gate_.Stage(std::move(e));
}

void Publisher::Publish(PlanPhase phase, const EpochPlan& plan,
                        const EpochTransition& transition) {
  // A proposal replaces an abandonment of its change; anything else comes
  // after it.
  if (phase == PlanPhase::kProposed) {
    unpublished_abandon_.reset();
  } else {
    PublishAbandon(transition);
  }
  if (phase == PlanPhase::kAbandoned) {
    unpublished_abandon_ = plan;  // at the change's end, unless replaced
    return;
  }
  stage_facts_();  // an update's epoch is one heartbeats accept
  updates_.Publish(phase, plan, transition);
}

void Publisher::PublishAbandon(const EpochTransition& transition) {
  std::optional<EpochPlan> plan =
      std::exchange(unpublished_abandon_, std::nullopt);
  if (!plan.has_value()) return;
  stage_facts_();
  updates_.Publish(PlanPhase::kAbandoned, *plan, transition);
}

void Publisher::Snapshot(const EpochTransition& transition) {
  updates_.Snapshot(transition);
}

void Publisher::Flush(const MemberTable& members,
                      const EpochTransition& transition) {
  PublishAbandon(transition);
  stage_facts_();
  const int64_t ticket = writer_.Enqueue(batch_.Take(members));
  if (ticket > 0) last_ticket_ = ticket;
  PassGates(GateStep::kSeal, last_ticket_);
}

void Publisher::Shutdown() {
  events_.Shutdown();
  updates_.Shutdown();
}

void Publisher::OnDurable(int64_t durable) {
  PassGates(GateStep::kRelease, durable);
}

void Publisher::PassGates(GateStep step, int64_t ticket) {
  const bool seal = step == GateStep::kSeal;
  {
    absl::MutexLock lock(&shown_mu_);
    std::vector<HeartbeatFacts> facts =
        seal ? facts_gate_.Seal(ticket) : facts_gate_.Release(ticket);
    std::vector<Event> events =
        seal ? event_gate_.Seal(ticket) : event_gate_.Release(ticket);
    ShowLocked(std::move(facts), std::move(events));
  }
  if (seal) {
    updates_.Seal(ticket);
  } else {
    updates_.Release(ticket);
  }
}

void Publisher::ShowLocked(std::vector<HeartbeatFacts> facts,
                           std::vector<Event> events) {
  if (!facts.empty()) {
    std::atomic_store(
        &facts_,
        std::shared_ptr<const HeartbeatFacts>(
            std::make_shared<HeartbeatFacts>(std::move(facts.back()))));
  }
  for (Event& e : events) events_.Append(std::move(e));
}

}  // namespace zshard::server
