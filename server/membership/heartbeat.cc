// Membership: the heartbeat path. Heartbeats and session checks take only
// the lease book's lock and read the facts that every change publishes in
// one step at its end, so they never wait for a proposal being planned,
// moves, plan hashing or store writes (docs/design.md section 6).
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "server/membership/membership.h"

namespace zshard::server {

void Membership::StageFactsLocked() {
  HeartbeatFacts f;
  const EpochPlan& committed = transition_.committed();
  f.committed_epoch = committed.epoch;
  f.pending_epoch = transition_.pending_epoch();
  f.next_epoch = transition_.next_epoch();
  f.failed = job_.failed();
  f.finished = job_.finished();
  f.committed_broken = health_.committed_broken;
  f.failure_reason = job_.failure_reason();
  f.unviable = world_.last_unviable();
  f.committed_world = committed.world;
  // A draining member is told to go once it holds no rank any more.
  for (const std::string& id : members_.draining()) {
    const Member* m = members_.Find(id);
    if (m == nullptr) continue;
    const bool holds = transition_.RankInProposal(id) >= 0 ||
                       transition_.RankInStable(id) >= 0 ||
                       transition_.RankInCommitted(id) >= 0;
    m->lease->drain_now.store(!holds);
  }
  publisher_.StageFacts(std::move(f));
}

absl::StatusOr<std::shared_ptr<MemberLease>> Membership::LiveLease(
    const std::string& worker_id, const std::string& token) {
  ZSHARD_ASSIGN_OR_RETURN(std::shared_ptr<MemberLease> lease,
                          leases_->Session(worker_id, token));
  if (!IsLive(lease->state.load())) {
    // Rare (a fenced or dead incarnation): the table words the reason.
    absl::MutexLock lock(&mu_);
    ZSHARD_RETURN_IF_ERROR(members_.Session(worker_id, token).status());
  }
  return lease;
}

absl::Status Membership::CheckSession(const std::string& worker_id,
                                      const std::string& token) {
  return LiveLease(worker_id, token).status();
}

absl::StatusOr<HeartbeatReply> Membership::Heartbeat(
    const std::string& worker_id, const std::string& token, int64_t epoch,
    int64_t step) {
  if (epoch < 0 || step < 0) {
    return absl::InvalidArgumentError("epoch and step must be >= 0");
  }
  ZSHARD_ASSIGN_OR_RETURN(std::shared_ptr<MemberLease> lease,
                          LiveLease(worker_id, token));
  std::shared_ptr<const HeartbeatFacts> facts = publisher_.Facts();
  if (epoch >= facts->next_epoch) {
    return absl::FailedPreconditionError(
        absl::StrCat("epoch ", epoch, " was never proposed"));
  }
  lease->Renew(epoch, step, clock_->NowMs());
  if (spec_.workload.steps > 0 && step >= spec_.workload.steps &&
      !facts->finished) {
    {
      // The end of the job (once per rank): this one takes the lock.
      Change lock(this);
      CheckFinishedLocked();
      FlushLocked();
    }
    facts = publisher_.Facts();
  }
  HeartbeatReply reply;
  reply.epoch = facts->committed_epoch;
  reply.pending_epoch = facts->pending_epoch;
  reply.state = lease->state.load();
  if (facts->failed) {
    reply.command = Command::kExit;
    reply.job_failed = true;
    reply.exit_reason = facts->failure_reason;
  } else if (facts->finished) {
    reply.command = Command::kExit;
  } else if (reply.state == MemberState::kDraining && lease->drain_now.load()) {
    reply.command = Command::kDrain;
  } else if (facts->committed_broken && lease->rank.load() >= 0) {
    reply.command = Command::kAbort;
  }
  if (!facts->unviable.empty()) {
    reply.waiting = absl::StrCat("no world can form: ", facts->unviable);
  } else if (lease->rank.load() < 0 && facts->committed_world > 0) {
    reply.waiting = absl::StrCat(
        "a spare: the world of ", facts->committed_world,
        " ranks is full; it takes a rank when one is lost or the world grows");
  }
  return reply;
}

}  // namespace zshard::server
