// Test harness for the membership state machine: a fake clock, named
// workers with their sessions, and helpers that drive transitions.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/clock.h"
#include "gtest/gtest.h"
#include "server/membership/membership.h"
#include "tests/server/test_job.h"

namespace zshard::server::testing {

struct Session {
  std::string id;
  std::string token;
};

class Harness {
 public:
  explicit Harness(job::JobSpec spec = TestJob(), StateStore* store = nullptr,
                   MembershipOptions options = {})
      : spec_(std::move(spec)) {
    m_ = Membership::Create(spec_, &clock_, store, std::move(options)).value();
  }

  Session Join(const std::string& name) {
    JoinArgs args;
    args.name = name;
    args.address = "127.0.0.1:1";
    auto r = m_->Join(args);
    EXPECT_TRUE(r.ok()) << r.status();
    Session s{r->worker_id, r->token};
    sessions_[name] = s;
    return s;
  }

  HeartbeatReply Beat(const std::string& name, int64_t step = 0) {
    const Session& s = sessions_.at(name);
    auto r = m_->Heartbeat(s.id, s.token, m_->View().epoch, step);
    EXPECT_TRUE(r.ok()) << name << ": " << r.status();
    return r.ok() ? *r : HeartbeatReply();
  }

  // Heartbeats every live worker except `skip`.
  void BeatAll(const std::string& skip = "") {
    for (const auto& [name, s] : sessions_) {
      if (name == skip || dead_.count(name)) continue;
      auto r = m_->Heartbeat(s.id, s.token, 0, 0);
      if (!r.ok()) dead_.insert(name);
    }
  }

  // Silences `victim` past the lease while everyone else heartbeats, then
  // ticks: the victim is DEAD and the world re-plans.
  void Kill(const std::string& victim) {
    clock_.AdvanceMs(3000);
    BeatAll(victim);
    clock_.AdvanceMs(3000);
    BeatAll(victim);
    m_->Tick();
  }

  // The latest plan update of each phase seen since the last call.
  std::vector<PlanUpdate> Updates() {
    WatchBatch b = m_->WaitForUpdates(seq_, absl::ZeroDuration());
    seq_ = b.last_seq;
    std::vector<PlanUpdate> out;
    for (const auto& u : b.updates) out.push_back(*u);
    return out;
  }

  // The live members the proposal `p` needs PREPARED acks from: its ranks
  // and the live ranks of the stable (base) epoch.
  std::vector<Session> Participants(const EpochPlan& p) {
    std::vector<Session> out;
    std::set<std::string> seen;
    auto add = [&](const std::string& id) {
      if (!seen.insert(id).second) return;
      for (const MemberView& v : m_->View().members) {
        if (v.member.worker_id == id && IsLive(v.member.state)) {
          out.push_back(SessionOf(id));
        }
      }
    };
    for (int r = 0; r < p.world; ++r) add(p.slots[r].worker_id);
    EpochPlan base = m_->StablePlan();
    for (int r = 0; r < base.world; ++r) add(base.slots[r].worker_id);
    return out;
  }

  // Acks PREPARED (with `step`) from every participant of the proposal and
  // then ACTIVE from its ranks; returns the committed plan.
  EpochPlan Settle(int64_t step = 0) {
    for (int round = 0; round < 4; ++round) {
      for (const PlanUpdate& u : Updates()) {
        if (u.phase == PlanPhase::kProposed) proposed_ = u.plan;
      }
      if (proposed_.epoch == 0) break;
      EpochPlan p = proposed_;
      proposed_ = EpochPlan();
      for (const Session& s : Participants(p)) {
        auto a = m_->AckPrepared(s.id, s.token, p.epoch, step, true);
        EXPECT_TRUE(a.ok()) << a.status();
      }
      for (int r = 0; r < p.world; ++r) {
        Session s = SessionOf(p.slots[r].worker_id);
        auto a = m_->AckActive(s.id, s.token, p.epoch);
        EXPECT_TRUE(a.ok()) << a.status();
      }
    }
    return m_->CommittedPlan();
  }

  Session SessionOf(const std::string& worker_id) {
    for (const auto& [name, s] : sessions_) {
      if (s.id == worker_id) return s;
    }
    ADD_FAILURE() << "no session for " << worker_id;
    return Session();
  }

  std::string NameAtRank(int rank) {
    return m_->CommittedPlan().slots.at(rank).name;
  }

  MemberState StateOf(const std::string& name) {
    for (const MemberView& v : m_->View().members) {
      if (v.member.worker_id == sessions_.at(name).id) return v.member.state;
    }
    return MemberState::kLeft;
  }

  FakeClock clock_{1000};
  job::JobSpec spec_;
  std::unique_ptr<Membership> m_;
  std::map<std::string, Session> sessions_;
  std::set<std::string> dead_;
  int64_t seq_ = -1;
  EpochPlan proposed_;
};

}  // namespace zshard::server::testing
